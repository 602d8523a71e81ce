// Small whole-file reads and writes shared by the binaries: PEM files, tokens, options, records.
#pragma once

#include <string>

#include "common/result.h"
#include "common/secret.h"

namespace granary {

// The whole content of the file at `path`. NotFound when it cannot be opened.
Result<std::string> readTextFile(const std::string& path);

// A credential kept in a file (a bearer token, as Kubernetes mounts Secrets): its content with
// surrounding whitespace and line ends trimmed. NotFound when the file cannot be read,
// InvalidArgument when it holds only whitespace. Errors name the path, never the content.
Result<Secret> readSecretFile(const std::string& path);

// Replaces the file at `path` with `text` whole: written beside it (PATH.next, mode 0600),
// fsynced and renamed over it, so that a crash leaves the old content or the new, never part.
Status writeFileDurably(const std::string& path, const std::string& text);

}  // namespace granary

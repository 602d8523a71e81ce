// Small whole-file reads shared by the binaries: PEM files, tokens, options.
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

}  // namespace granary

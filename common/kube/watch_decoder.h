// Decodes a watch stream — newline-delimited JSON events on a chunked response — as bytes
// arrive, without buffering more than one line. Pure.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/kube/object.h"
#include "common/status.h"

namespace granary::kube {

struct WatchEvent {
  enum class Type { kAdded, kModified, kDeleted, kBookmark, kError };
  Type type = Type::kAdded;
  Json object;  // the object; for kError a metav1.Status (code 410: resourceVersion too old)
};

class WatchDecoder {
 public:
  // Lines longer than this are refused (a broken or hostile server). Default 64 MiB.
  explicit WatchDecoder(size_t maxLineBytes = 64u << 20) : maxLineBytes_(maxLineBytes) {}

  // Decodes every complete line in `bytes` (plus what was buffered) into `out`. Internal
  // error for a line that is not a watch event or is too long; the stream must be dropped.
  Status feed(std::string_view bytes, std::vector<WatchEvent>& out);

  // True when the stream ended in the middle of a line (a truncated event, to be ignored).
  bool hasPartialLine() const { return !partial_.empty(); }

 private:
  Status decodeLine(std::string_view line, std::vector<WatchEvent>& out);

  size_t maxLineBytes_;
  std::string partial_;
};

}  // namespace granary::kube

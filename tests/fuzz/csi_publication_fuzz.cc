// Fuzzes the CSI plugin's reading of a NodePublishVolume (cache-node/csi/publication.h): the
// volume id, target path, capability and volume context (volumeAttributes plus kubelet's pod
// keys) → a Publication, and the one-line record the node keeps of it.
//
// Input: fields separated by NUL bytes, so that any other byte (tabs, newlines) can be in one:
//   volume id \0 target path \0 capability ("mount", "block", else none) \0 generation
//   \0 key \0 value \0 key \0 value ...
// For example "vol-1\0/var/lib/kubelet/pods/u/volumes/x\0mount\0" ... "dataset\0coco".
//
// Invariants beyond "no crash":
//   - an accepted publication is of the pod's own namespace and names a dataset and a pod;
//   - its record reads back as the same publication and generation (a restarted node repairs
//     the pod's mount from it);
//   - the whole input read as a record line: a record that parses, formatted and parsed again,
//     is the same record.
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cache-node/csi/publication.h"
#include "tests/fuzz/fuzz_check.h"

namespace granary::cache {
namespace {

std::vector<std::string> split(std::string_view input) {
  std::vector<std::string> fields;
  size_t start = 0;
  while (start <= input.size()) {
    const size_t end = input.find('\0', start);
    fields.emplace_back(input.substr(start, end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return fields;
}

bool same(const PublicationRecord& a, const PublicationRecord& b) {
  const Publication &x = a.publication, &y = b.publication;
  return a.generation == b.generation && x.volumeId == y.volumeId && x.targetPath == y.targetPath &&
         x.datasetNamespace == y.datasetNamespace && x.datasetName == y.datasetName &&
         x.podNamespace == y.podNamespace && x.podName == y.podName && x.podUid == y.podUid;
}

void checkRecordRoundTrip(const PublicationRecord& record) {
  const std::string line = formatRecord(record);
  const auto again = parseRecord(line);
  GRANARY_FUZZ_CHECK(again && same(record, *again),
                     "the record does not read back as itself: \"" + line + "\"");
}

}  // namespace
}  // namespace granary::cache

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace granary::cache;
  if (size > 16 * 1024) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data), size);

  if (const auto record = parseRecord(std::string(input))) checkRecordRoundTrip(*record);

  const std::vector<std::string> fields = split(input);
  PublishFields request;
  request.volumeId = fields[0];
  if (fields.size() > 1) request.targetPath = fields[1];
  if (fields.size() > 2) {
    request.hasCapability = fields[2] == "mount" || fields[2] == "block";
    request.blockAccess = fields[2] == "block";
  }
  int64_t generation = 0;
  if (fields.size() > 3) {
    std::from_chars(fields[3].data(), fields[3].data() + fields[3].size(), generation);
  }
  for (size_t i = 4; i + 1 < fields.size(); i += 2) {
    request.volumeContext[fields[i]] = fields[i + 1];
  }
  auto publication = parsePublication(request);
  if (!publication.isOk()) return 0;
  const Publication& p = *publication;
  GRANARY_FUZZ_CHECK(p.datasetNamespace == p.podNamespace && !p.datasetName.empty() &&
                         !p.podNamespace.empty() && !p.podName.empty() && !p.podUid.empty() &&
                         !p.volumeId.empty() && p.targetPath.is_absolute(),
                     "accepted: " + formatRecord({p, generation}));
  checkRecordRoundTrip({p, generation});
  return 0;
}

// The peer data plane's series, declared once: bytes sent to and received from each peer (by node
// name), how long each chunk took on the wire, connections open, and failures by peer and cause.
// Thread-safety: the families may be used from any thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "common/metrics.h"

namespace granary::cache::transfer {

// Why a transfer failed, as the `cause` label says it.
enum class FailureCause {
  kConnect,          // the peer could not be reached
  kUnauthenticated,  // a token refused (on the side that refused it, "peer" is the address)
  kChecksum,         // bytes that failed the sender's recorded checksums
  kStalled,          // the far end stopped sending or reading for the stall timeout
  kClosed,           // the connection ended mid-transfer (a peer that died, a receiver that left)
  kRefused,          // the peer answered with an error (a chunk it no longer holds, a full node)
  kProtocol,         // a malformed frame
};
std::string_view causeName(FailureCause cause);

class TransferMetrics {
 public:
  static Result<std::unique_ptr<TransferMetrics>> create(MetricsRegistry& registry);

  void sent(const std::string& peer, int64_t bytes, double seconds);
  void received(const std::string& peer, int64_t bytes, double seconds);
  void failed(const std::string& peer, FailureCause cause);
  // A connection opened (+1) or closed (-1), "in" (served) or "out" (to a peer).
  void connections(std::string_view direction, int change);

 private:
  struct Families {
    CounterFamily sentBytes, receivedBytes, failures;
    HistogramFamily seconds;
    GaugeFamily connections;
  };
  explicit TransferMetrics(Families families) : families_(std::move(families)) {}
  Families families_;
};

}  // namespace granary::cache::transfer

#include "cache-node/transfer/transfer_metrics.h"

namespace granary::cache::transfer {

std::string_view causeName(FailureCause cause) {
  switch (cause) {
    case FailureCause::kConnect:
      return "connect";
    case FailureCause::kUnauthenticated:
      return "unauthenticated";
    case FailureCause::kChecksum:
      return "checksum";
    case FailureCause::kStalled:
      return "stalled";
    case FailureCause::kClosed:
      return "closed";
    case FailureCause::kRefused:
      return "refused";
    case FailureCause::kProtocol:
      return "protocol";
  }
  return "unknown";
}

Result<std::unique_ptr<TransferMetrics>> TransferMetrics::create(MetricsRegistry& registry) {
  GRANARY_ASSIGN_OR_RETURN(
      auto sentBytes,
      registry.addCounter({.name = "granary_peer_sent_bytes_total",
                           .unit = MetricUnit::kBytes,
                           .help = "Chunk bytes this node sent to each peer over the data plane.",
                           .labels = {"peer"}}));
  GRANARY_ASSIGN_OR_RETURN(
      auto receivedBytes,
      registry.addCounter({.name = "granary_peer_received_bytes_total",
                           .unit = MetricUnit::kBytes,
                           .help = "Chunk bytes this node received from each peer over the data "
                                   "plane, checked against the sender's checksums.",
                           .labels = {"peer"}}));
  GRANARY_ASSIGN_OR_RETURN(
      auto failures,
      registry.addCounter({.name = "granary_peer_failures_total",
                           .help = "Data-plane transfers that failed, by peer and cause (connect, "
                                   "unauthenticated, checksum, stalled, closed, refused, "
                                   "protocol).",
                           .labels = {"peer", "cause"}}));
  GRANARY_ASSIGN_OR_RETURN(
      auto seconds,
      registry.addHistogram({.name = "granary_peer_transfer_seconds",
                             .type = MetricType::kHistogram,
                             .unit = MetricUnit::kSeconds,
                             .help = "Time from a chunk's request to its last byte, by direction "
                                     "(send, receive).",
                             .labels = {"direction"},
                             .buckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                         0.5, 1, 2.5, 10}}));
  GRANARY_ASSIGN_OR_RETURN(
      auto connections,
      registry.addGauge({.name = "granary_peer_connections",
                         .type = MetricType::kGauge,
                         .help = "Data-plane connections open, by direction (in: served, out: to "
                                 "peers).",
                         .labels = {"direction"}}));
  // The series of each direction exist from the start (no connection yet is 0, not absent).
  for (const char* direction : {"in", "out"}) (void)connections.with({direction});
  for (const char* direction : {"send", "receive"}) (void)seconds.with({direction});
  return std::unique_ptr<TransferMetrics>(
      new TransferMetrics({sentBytes, receivedBytes, failures, seconds, connections}));
}

void TransferMetrics::sent(const std::string& peer, int64_t bytes, double seconds) {
  families_.sentBytes.with({peer}).increment(static_cast<double>(bytes));
  families_.seconds.with({"send"}).observe(seconds);
}

void TransferMetrics::received(const std::string& peer, int64_t bytes, double seconds) {
  families_.receivedBytes.with({peer}).increment(static_cast<double>(bytes));
  families_.seconds.with({"receive"}).observe(seconds);
}

void TransferMetrics::failed(const std::string& peer, FailureCause cause) {
  families_.failures.with({peer, std::string(causeName(cause))}).increment();
}

void TransferMetrics::connections(std::string_view direction, int change) {
  families_.connections.with({std::string(direction)}).increment(change);
}

}  // namespace granary::cache::transfer

// Between granary's Status and gRPC's status, for every gRPC server and client of granary: the
// canonical codes map one to one where both have them. Pure. And gRPC deadlines, and the
// arguments of granary's channels to its cache nodes.
#pragma once

#include <grpc/grpc.h>
#include <grpc/support/time.h>
#include <grpcpp/support/channel_arguments.h>
#include <grpcpp/support/status.h>

#include <chrono>

#include "common/result.h"

namespace granary {

grpc::Status toGrpc(const Status& status);
Status fromGrpc(const grpc::Status& status);

// A deadline `span` from now on gRPC's own monotonic clock, for ClientContext::set_deadline and
// Server::Shutdown. gRPC's timers run on real time whatever Clock a component is given, so its
// deadlines are spans from gRPC's now, never readings of that Clock.
inline gpr_timespec grpcDeadlineAfter(std::chrono::milliseconds span) {
  return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                      gpr_time_from_millis(span.count(), GPR_TIMESPAN));
}

// Arguments of a channel to a cache node (the operator's and each peer's): a node that comes back
// after a restart is reached again within about a second of listening. gRPC's own reconnect
// backoff grows to 120 s between tries, so without these a node restarted after a few failed
// tries stayed unreachable to its callers for up to a minute after it answered again. One
// connection try a second to a node that is down costs next to nothing.
grpc::ChannelArguments nodeChannelArguments();

}  // namespace granary

// Graceful shutdown for granary's binaries: SIGTERM (Kubernetes' stop) and SIGINT (Ctrl-C)
// become a stop request that the main loop and every component can observe.
#pragma once

#include <stop_token>

namespace granary {

// Blocks SIGTERM and SIGINT in the calling thread and every thread it starts afterwards, and
// returns a stop source that a background thread requests when either signal arrives. Call it
// first in main(), before any thread is started.
std::stop_source stopOnTerminationSignals();

}  // namespace granary

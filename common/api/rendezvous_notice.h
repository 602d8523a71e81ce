// Tells an elastic job's rendezvous store which agents are gone (api::rendezvousNotice), so that
// the others meet again at once (see api::rendezvousStoreCommand). Used by the operator when a
// worker pod is lost and by granaryctl when a worker process ends.
#pragma once

#include <chrono>
#include <string>

#include "common/status.h"

namespace granary::api {

// POSTs `notice` to http://<address>/gone (address: host:port). Unavailable when the store cannot
// be reached within `timeout` or answers other than 204; the job goes on either way, its agents
// then meeting once torch's keep-alive lapses.
Status sendRendezvousNotice(const std::string& address, const std::string& notice,
                            std::chrono::milliseconds timeout = std::chrono::seconds(2));

}  // namespace granary::api

// Tells an elastic job's rendezvous store which agents are gone (api::rendezvousNotice), so that
// the others meet again at once (see api::rendezvousStoreCommand). Used by the operator when a
// worker pod is lost and by granaryctl when a worker process ends.
//
// A store takes a notice only with its job's notice token (the store reads it from
// api::kRendezvousTokenEnv): on a cluster the operator derives it from a key only it holds and
// hands it to the store through a Secret of the job's namespace, so that a pod that merely reaches
// the store's Service cannot make a healthy job meet again. Tokens are secrets: never logged.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "common/status.h"

namespace granary::api {

// POSTs `notice` to http://<address>/gone (address: host:port) with "Authorization: Bearer
// <token>". Unavailable when the store cannot be reached within `timeout` or answers other than
// 204 (403: the token is not the store's); the job goes on either way, its agents then meeting
// once torch's keep-alive lapses. The message never holds the token.
Status sendRendezvousNotice(const std::string& address, const std::string& notice,
                            const std::string& token,
                            std::chrono::milliseconds timeout = std::chrono::seconds(2));

// The notice token of the job of uid `jobUid`: hex HMAC-SHA256 under `key` (the operator's own
// secret), the same for the same key and job (so an operator restarted with the same key still
// tells the stores it created), unguessable without the key. Empty for an empty key.
std::string rendezvousNoticeToken(std::string_view key, std::string_view jobUid);
// 32 random bytes in hex (OpenSSL's RAND_bytes): granaryctl's token for its own store, and the
// operator's key when it is given none.
std::string randomRendezvousToken();

}  // namespace granary::api

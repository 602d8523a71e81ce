// The objects a TrainingJob owns: one worker pod per rank and a headless Service. Names are
// deterministic (<job>-worker-<rank>; the Service is <job>), so applying them again changes
// nothing. Pure.
#pragma once

#include <string>

#include "common/api/training_job.h"
#include "common/kube/object.h"

namespace granary::op {

using api::workerName;

// Rank 0's stable DNS name through the headless Service.
std::string masterAddress(const std::string& job, const std::string& ns);

// The worker pod of `rank` in gang attempt `attempt`: the job's template with restartPolicy
// Never (the operator restarts whole gangs), the scheduler, GPUs on the first container, the
// torchrun environment, a read-only CSI volume per dataset at its mountPath (under warmPolicy
// BeforeStart published only once the node's share of it is warm: names::kCsiWarmFirstAttribute,
// so that a replacement or a worker growing the job joins on warm data), hostname and
// subdomain for DNS, an owner reference to the job, the access-order hints
// (names::kAccessOrderFilesAnnotation), and, on ranks above 0 of a fixed gang, an init container
// that waits until rank 0's DNS record resolves (an elastic job's workers meet at its rendezvous
// store instead, elasticRendezvous).
// `versions` (the job's status.datasetVersions, or null) pins each dataset's volume to a version;
// `checkpointPeers` (checkpointPeersAttribute) names the nodes its checkpoint volume's restore
// reads before the origin.
kube::Json workerPod(const kube::Json& job, const api::TrainingJobSpec& spec, int rank, int attempt,
                     const kube::Json& versions = kube::Json(),
                     const std::string& checkpointPeers = "");
// An elastic job's rendezvous: the store's Service (<job>-rendezvous) and the id of attempt
// `attempt` (the job's uid and the attempt: a gang restart meets at a fresh rendezvous).
std::string rendezvousName(const std::string& job);
api::Rendezvous elasticRendezvous(const kube::Json& job, int attempt);
// The store pod: the template's first container's image running api::rendezvousStoreCommand
// on api::kRendezvousPort and api::kRendezvousNoticePort (restartPolicy Always, so that a crash
// restarts it in place; no GPUs), labelled names::kRendezvousLabel, and the ClusterIP Service in
// front of both ports. Neither dies with a worker; one store serves every attempt's rendezvous.
// The store reads its job's notice token (api::rendezvousNoticeToken) from the Secret
// rendezvousSecret makes (<job>-rendezvous, key kRendezvousTokenKey, owned by the job) through
// api::kRendezvousTokenEnv: a pod of the namespace that may not read Secrets cannot learn it.
kube::Json rendezvousPod(const kube::Json& job);
kube::Json rendezvousService(const kube::Json& job);
inline constexpr const char* kRendezvousTokenKey = "notice-token";
kube::Json rendezvousSecret(const kube::Json& job, const std::string& token);

// Headless, publishing addresses before readiness, so rank 0 resolves as soon as it has an IP.
kube::Json headlessService(const kube::Json& job, const api::TrainingJobSpec& spec);

}  // namespace granary::op

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
// torchrun environment, a read-only CSI volume per dataset at its mountPath, hostname and
// subdomain for DNS, an owner reference to the job, the access-order hints
// (names::kAccessOrderFilesAnnotation), and, on ranks above 0, an init container that waits until
// rank 0's DNS record resolves.
// `versions` (the job's status.datasetVersions, or null) pins each dataset's volume to a version.
kube::Json workerPod(const kube::Json& job, const api::TrainingJobSpec& spec, int rank, int attempt,
                     const kube::Json& versions = kube::Json());
// Headless, publishing addresses before readiness, so rank 0 resolves as soon as it has an IP.
kube::Json headlessService(const kube::Json& job, const api::TrainingJobSpec& spec);

}  // namespace granary::op

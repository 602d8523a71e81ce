// Leader election on a coordination.k8s.io/v1 Lease, with client-go's timing: a lease lasts
// 15 s, the leader renews within 10 s or steps down, candidates retry every 2 s. A lease is
// taken over only when its holder has not renewed it for a whole lease duration, measured on
// this process's own monotonic clock (no trust in other machines' clocks).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <stop_token>
#include <string>

#include "common/clock.h"
#include "common/kube/client.h"

namespace granary::kube {

struct LeaderElectionOptions {
  std::string ns;        // namespace of the Lease
  std::string name;      // name of the Lease
  std::string identity;  // unique per process, e.g. pod name + random suffix
  std::chrono::milliseconds leaseDuration{15'000};
  std::chrono::milliseconds renewDeadline{10'000};
  std::chrono::milliseconds retryPeriod{2'000};
  // Release the lease when stepping down, so a successor need not wait it out. Default true.
  bool releaseOnCancel = true;
};

// An identity unique to this process among the candidates: host name and pid.
std::string candidateIdentity();

class LeaderElector {
 public:
  LeaderElector(Client& client, LeaderElectionOptions options, Clock& clock = realClock());

  // Campaigns until leading, then runs `lead` on this thread with a token that is stopped
  // when leadership is lost (renewal failed for renewDeadline, or another holder appeared) or
  // `stop` is requested. Returns after `lead` returns: OK when stopped, FailedPrecondition when
  // leadership was lost.
  Status run(const std::function<void(std::stop_token)>& lead, std::stop_token stop);

  bool isLeader() const { return leader_; }
  const LeaderElectionOptions& options() const { return options_; }

 private:
  // One attempt to acquire or renew. OK when this process holds the lease afterwards.
  Status tryAcquireOrRenew();
  Status release();

  Client& client_;
  LeaderElectionOptions options_;
  Clock& clock_;
  std::atomic<bool> leader_{false};
  // What this process last saw of the lease, and when (monotonic) it saw it change.
  std::string observedHolder_;
  std::string observedRenewTime_;
  Clock::MonoTime observedAt_{};
};

}  // namespace granary::kube

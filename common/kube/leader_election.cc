#include "common/kube/leader_election.h"

#include <unistd.h>

#include <thread>

#include "common/log.h"

namespace granary::kube {

std::string candidateIdentity() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return std::string(host) + "_" + std::to_string(::getpid());
}

namespace {

const Logger& logger() {
  static const Logger log("leader-election");
  return log;
}

}  // namespace

LeaderElector::LeaderElector(Client& client, LeaderElectionOptions options, Clock& clock)
    : client_(client), options_(std::move(options)), clock_(clock) {}

Status LeaderElector::tryAcquireOrRenew() {
  const std::string now = metav1MicroTime(clock_.wallNow());
  const int leaseSeconds = static_cast<int>(
      std::chrono::duration_cast<std::chrono::seconds>(options_.leaseDuration).count());
  auto current = client_.get(resources::leases(), options_.ns, options_.name);
  if (!current.isOk() && current.status().code() == StatusCode::kNotFound) {
    Json lease = Json::object();
    lease["apiVersion"] = Json::string("coordination.k8s.io/v1");
    lease["kind"] = Json::string("Lease");
    lease["metadata"] = Json::object();
    lease["metadata"]["name"] = Json::string(options_.name);
    lease["metadata"]["namespace"] = Json::string(options_.ns);
    lease["spec"] = Json::object();
    lease["spec"]["holderIdentity"] = Json::string(options_.identity);
    lease["spec"]["leaseDurationSeconds"] = Json::number(std::max(1, leaseSeconds));
    lease["spec"]["acquireTime"] = Json::string(now);
    lease["spec"]["renewTime"] = Json::string(now);
    lease["spec"]["leaseTransitions"] = Json::number(0);
    GRANARY_RETURN_IF_ERROR(client_.create(resources::leases(), options_.ns, lease).status());
    observedHolder_ = options_.identity;
    observedRenewTime_ = now;
    observedAt_ = clock_.monoNow();
    return Status::ok();
  }
  GRANARY_RETURN_IF_ERROR(current.status());

  Json lease = *current;
  const Json spec = lease.has_object_field("spec") ? lease.at("spec") : Json::object();
  const std::string holder =
      spec.has_string_field("holderIdentity") ? spec.at("holderIdentity").as_string() : "";
  const std::string renewTime =
      spec.has_string_field("renewTime") ? spec.at("renewTime").as_string() : "";
  if (holder != observedHolder_ || renewTime != observedRenewTime_) {
    observedHolder_ = holder;
    observedRenewTime_ = renewTime;
    observedAt_ = clock_.monoNow();
  }
  const bool mine = holder == options_.identity;
  const bool expired = holder.empty() || clock_.monoNow() >= observedAt_ + options_.leaseDuration;
  if (!mine && !expired) {
    return failedPrecondition("lease " + options_.ns + "/" + options_.name + " is held by " +
                              holder);
  }
  if (!lease.has_object_field("spec")) lease["spec"] = Json::object();
  auto& out = lease["spec"];
  if (!mine) {
    out["acquireTime"] = Json::string(now);
    const int transitions =
        spec.has_integer_field("leaseTransitions") ? spec.at("leaseTransitions").as_integer() : 0;
    out["leaseTransitions"] = Json::number(transitions + 1);
  }
  out["holderIdentity"] = Json::string(options_.identity);
  out["leaseDurationSeconds"] = Json::number(std::max(1, leaseSeconds));
  out["renewTime"] = Json::string(now);
  GRANARY_RETURN_IF_ERROR(
      client_.update(resources::leases(), lease).status());  // 409: lost the race
  observedHolder_ = options_.identity;
  observedRenewTime_ = now;
  observedAt_ = clock_.monoNow();
  return Status::ok();
}

Status LeaderElector::release() {
  auto current = client_.get(resources::leases(), options_.ns, options_.name);
  GRANARY_RETURN_IF_ERROR(current.status());
  Json lease = *current;
  if (!lease.has_object_field("spec") || !lease.at("spec").has_string_field("holderIdentity") ||
      lease.at("spec").at("holderIdentity").as_string() != options_.identity) {
    return Status::ok();
  }
  lease["spec"]["holderIdentity"] = Json::string("");
  lease["spec"]["leaseDurationSeconds"] = Json::number(1);
  lease["spec"]["renewTime"] = Json::string(metav1MicroTime(clock_.wallNow()));
  return client_.update(resources::leases(), lease).status();
}

Status LeaderElector::run(const std::function<void(std::stop_token)>& lead, std::stop_token stop) {
  const std::string lease = options_.ns + "/" + options_.name;
  // Campaign.
  while (!stop.stop_requested()) {
    const Status acquired = tryAcquireOrRenew();
    if (acquired.isOk()) break;
    if (acquired.code() != StatusCode::kFailedPrecondition) {
      logger().warn("cannot acquire the lease", {{"lease", lease}, {"error", acquired}});
    }
    clock_.sleepFor(options_.retryPeriod, stop);
  }
  if (stop.stop_requested()) return Status::ok();
  leader_ = true;
  logger().info("became leader", {{"lease", lease}, {"identity", options_.identity}});

  // Lead on a thread of its own while this one renews.
  std::stop_source leadership;
  std::jthread leader([&] { lead(leadership.get_token()); });
  bool lost = false;
  auto lastRenew = clock_.monoNow();
  while (!stop.stop_requested()) {
    if (!clock_.sleepFor(options_.retryPeriod, stop)) break;
    const Status renewed = tryAcquireOrRenew();
    if (renewed.isOk()) {
      lastRenew = clock_.monoNow();
      continue;
    }
    if (renewed.code() == StatusCode::kFailedPrecondition ||
        clock_.monoNow() - lastRenew >= options_.renewDeadline) {
      logger().error("lost the lease; stopping", {{"lease", lease}, {"error", renewed}});
      lost = true;
      break;
    }
    logger().warn("renewal failed; retrying", {{"lease", lease}, {"error", renewed}});
  }
  leadership.request_stop();
  leader.join();
  leader_ = false;
  if (lost) return failedPrecondition("lost leadership of lease " + lease);
  if (options_.releaseOnCancel) {
    if (Status released = release(); !released.isOk()) {
      logger().warn("cannot release the lease", {{"lease", lease}, {"error", released}});
    }
  }
  return Status::ok();
}

}  // namespace granary::kube

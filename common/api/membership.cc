#include "common/api/membership.h"

namespace granary::api {

LossResponse respondToLoss(const TrainingJobSpec& spec, int remaining, bool restartable,
                           bool budgetLeft) {
  const bool mayRestart = restartable && budgetLeft;
  if (spec.elastic && remaining >= spec.elastic->minWorkers)
    return mayRestart ? LossResponse::kReplace : LossResponse::kContinue;
  return mayRestart ? LossResponse::kGangRestart : LossResponse::kFail;
}

std::string_view lossResponseName(LossResponse response) {
  switch (response) {
    case LossResponse::kReplace:
      return "Replace";
    case LossResponse::kContinue:
      return "Continue";
    case LossResponse::kGangRestart:
      return "GangRestart";
    case LossResponse::kFail:
      return "Fail";
  }
  return "Fail";
}

std::string_view membershipKindName(MembershipChange::Kind kind) {
  switch (kind) {
    case MembershipChange::Kind::kLost:
      return "Lost";
    case MembershipChange::Kind::kJoined:
      return "Joined";
    case MembershipChange::Kind::kGangRestart:
      return "GangRestart";
  }
  return "Lost";
}

Membership::Membership(int wanted, int running, Time now) : wanted_(wanted), running_(0) {
  setRunning(running, now);
}

void Membership::lost(const std::string& worker, const std::string& cause, Time now) {
  setRunning(running_ - 1, now);
  record({MembershipChange::Kind::kLost, now, worker, cause, running_});
}

void Membership::joined(const std::string& worker, const std::string& cause, Time now) {
  setRunning(running_ + 1, now);
  record({MembershipChange::Kind::kJoined, now, worker, cause, running_});
}

void Membership::gangRestart(const std::string& cause, Time now) {
  setRunning(wanted_, now);
  record({MembershipChange::Kind::kGangRestart, now, "", cause, running_});
}

std::chrono::duration<double> Membership::timeBelowWanted(Time now) const {
  return below_ + (belowSince_ ? now - *belowSince_ : std::chrono::duration<double>(0));
}

void Membership::record(MembershipChange change) {
  ++count_;
  changes_.push_back(std::move(change));
  if (changes_.size() > kMaxKept) changes_.erase(changes_.begin());
}

void Membership::setRunning(int running, Time now) {
  running_ = std::max(0, running);
  const bool below = running_ < wanted_;
  if (below && !belowSince_) belowSince_ = now;
  if (!below && belowSince_) {
    below_ += now - *belowSince_;
    belowSince_.reset();
  }
}

}  // namespace granary::api

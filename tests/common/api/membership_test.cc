// An elastic job's membership (common/api/membership.h): what a lost worker costs, and the
// record of changes with the time spent below the workers wanted.
#include "common/api/membership.h"

#include <gtest/gtest.h>

namespace granary::api {
namespace {

using namespace std::chrono_literals;

TrainingJobSpec spec(std::optional<ElasticPolicy> elastic) {
  TrainingJobSpec s;
  s.workers = 3;
  s.elastic = elastic;
  return s;
}

TEST(RespondToLoss, AnElasticJobGoesOnWhileMinWorkersRemain) {
  const TrainingJobSpec elastic = spec(ElasticPolicy{.minWorkers = 2, .maxWorkers = 3});
  EXPECT_EQ(respondToLoss(elastic, 2, true, true), LossResponse::kReplace);
  EXPECT_EQ(respondToLoss(elastic, 2, false, true), LossResponse::kContinue)
      << "restartPolicy allows no restart: the rest go on without it";
  EXPECT_EQ(respondToLoss(elastic, 2, true, false), LossResponse::kContinue)
      << "backoffLimit used up: the rest go on without it";
  EXPECT_EQ(respondToLoss(elastic, 1, true, true), LossResponse::kGangRestart)
      << "below minWorkers: a gang restart as for a fixed gang";
  EXPECT_EQ(respondToLoss(elastic, 1, true, false), LossResponse::kFail);
}

TEST(RespondToLoss, AFixedGangRestartsOrFails) {
  const TrainingJobSpec fixed = spec(std::nullopt);
  EXPECT_EQ(respondToLoss(fixed, 2, true, true), LossResponse::kGangRestart);
  EXPECT_EQ(respondToLoss(fixed, 2, false, true), LossResponse::kFail);
  EXPECT_EQ(respondToLoss(fixed, 2, true, false), LossResponse::kFail);
}

TEST(Membership, CountsChangesAndTheTimeBelowWanted) {
  const Membership::Time t0{};
  Membership m(3, 3, t0);
  EXPECT_EQ(m.timeBelowWanted(t0 + 10s).count(), 0);
  m.lost("job-worker-1", "killed by SIGKILL", t0 + 10s);
  m.lost("job-worker-2", "exit 1", t0 + 12s);
  EXPECT_EQ(m.running(), 1);
  EXPECT_DOUBLE_EQ(m.timeBelowWanted(t0 + 15s).count(), 5);
  m.joined("job-worker-1", "replacement", t0 + 16s);
  m.joined("job-worker-2", "replacement", t0 + 20s);
  EXPECT_EQ(m.running(), 3);
  EXPECT_DOUBLE_EQ(m.timeBelowWanted(t0 + 100s).count(), 10) << "below from 10 s to 20 s";
  m.lost("job-worker-0", "exit 1", t0 + 110s);
  m.gangRestart("job-worker-0 exited 1", t0 + 111s);
  EXPECT_EQ(m.running(), 3);
  EXPECT_DOUBLE_EQ(m.timeBelowWanted(t0 + 200s).count(), 11);
  ASSERT_EQ(m.changes().size(), 6u);
  EXPECT_EQ(m.changes()[1].worker, "job-worker-2");
  EXPECT_EQ(m.changes()[1].running, 1);
  EXPECT_EQ(m.changes()[5].kind, MembershipChange::Kind::kGangRestart);
  EXPECT_EQ(membershipKindName(m.changes()[2].kind), "Joined");
}

TEST(Membership, KeepsTheNewestChanges) {
  const Membership::Time t0{};
  Membership m(2, 2, t0);
  for (int i = 0; i < 40; ++i) {
    m.lost("w", "exit " + std::to_string(i), t0 + std::chrono::seconds(i));
    m.joined("w", "replacement", t0 + std::chrono::seconds(i));
  }
  EXPECT_EQ(m.changeCount(), 80);
  ASSERT_EQ(m.changes().size(), Membership::kMaxKept);
  EXPECT_EQ(m.changes().back().cause, "replacement");
  EXPECT_EQ(m.changes().front().cause, "exit 24");
}

}  // namespace
}  // namespace granary::api

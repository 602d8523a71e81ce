#include "common/status.h"

#include <gtest/gtest.h>

#include <set>
#include <sstream>

namespace granary {
namespace {

TEST(Status, DefaultIsOk) {
  Status status;
  EXPECT_TRUE(status.isOk());
  EXPECT_EQ(status.code(), StatusCode::kOk);
  EXPECT_EQ(status.toString(), "ok");
}

TEST(Status, CarriesCodeAndMessage) {
  Status status = notFound("dataset ml/imagenet does not exist");
  EXPECT_FALSE(status.isOk());
  EXPECT_EQ(status.code(), StatusCode::kNotFound);
  EXPECT_EQ(status.message(), "dataset ml/imagenet does not exist");
  EXPECT_EQ(status.toString(), "not_found: dataset ml/imagenet does not exist");
}

TEST(Status, WithContextPrefixesFailuresOnly) {
  EXPECT_EQ(conflict("stale").withContext("update ds/a").message(), "update ds/a: stale");
  EXPECT_EQ(conflict("stale").withContext("x").code(), StatusCode::kConflict);
  EXPECT_TRUE(Status::ok().withContext("ignored").isOk());
  EXPECT_EQ(Status::ok().withContext("ignored").message(), "");
}

TEST(Status, EveryCodeHasADistinctName) {
  std::set<std::string_view> names;
  for (int c = 0; c <= static_cast<int>(StatusCode::kInternal); ++c) {
    names.insert(statusCodeName(static_cast<StatusCode>(c)));
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(StatusCode::kInternal) + 1);
  EXPECT_EQ(names.count("unknown"), 0u);
}

TEST(Status, StreamsAsToString) {
  std::ostringstream out;
  out << invalidArgument("replicas must be >= 1");
  EXPECT_EQ(out.str(), "invalid_argument: replicas must be >= 1");
}

Status failsWhen(bool fail) {
  GRANARY_RETURN_IF_ERROR(fail ? unavailable("origin down") : Status::ok());
  return alreadyExists("reached the end");
}

TEST(Status, ReturnIfErrorPropagatesFailureAndContinuesOnOk) {
  EXPECT_EQ(failsWhen(true).code(), StatusCode::kUnavailable);
  EXPECT_EQ(failsWhen(false).code(), StatusCode::kAlreadyExists);
}

}  // namespace
}  // namespace granary

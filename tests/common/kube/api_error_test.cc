#include "common/kube/api_error.h"

#include <gtest/gtest.h>

#include "common/backoff.h"
#include "common/kube/resource.h"
#include "common/url.h"

namespace granary::kube {
namespace {

TEST(ApiError, MapsStatusCodesAndKeepsTheServersMessage) {
  const std::string conflict =
      R"({"kind":"Status","status":"Failure","message":"the object has been modified","reason":"Conflict","code":409})";
  Status s =
      statusFromHttp(409, conflict, "PUT /apis/granary.io/v1alpha1/namespaces/ml/datasets/a");
  EXPECT_EQ(s.code(), StatusCode::kConflict);
  EXPECT_EQ(s.message(),
            "PUT /apis/granary.io/v1alpha1/namespaces/ml/datasets/a: the object has been modified");
  EXPECT_EQ(statusFromHttp(409, R"({"reason":"AlreadyExists","message":"x"})", "op").code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(statusFromHttp(404, "", "op").code(), StatusCode::kNotFound);
  EXPECT_EQ(statusFromHttp(410, "", "op").code(), StatusCode::kGone);
  EXPECT_EQ(statusFromHttp(422, "", "op").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(statusFromHttp(401, "", "op").code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(statusFromHttp(403, "", "op").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(statusFromHttp(429, "", "op").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(statusFromHttp(503, "", "op").code(), StatusCode::kUnavailable);
  EXPECT_EQ(statusFromHttp(504, "", "op").code(), StatusCode::kDeadlineExceeded);
}

TEST(ApiError, NonJsonBodiesAreQuotedAndShortened) {
  Status s = statusFromHttp(502, "<html>" + std::string(500, 'x'), "GET /api/v1/pods");
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.message().rfind("GET /api/v1/pods: HTTP 502: \"<html>", 0), 0u);
  EXPECT_LT(s.message().size(), 260u);
}

TEST(ApiError, OnlyTransientFailuresAreRetried) {
  EXPECT_TRUE(isRetryable(statusFromHttp(429, "", "op")));
  EXPECT_TRUE(isRetryable(statusFromHttp(500, "", "op")));
  EXPECT_TRUE(isRetryable(unavailable("connection refused")));
  EXPECT_FALSE(isRetryable(statusFromHttp(409, "", "op")));
  EXPECT_FALSE(isRetryable(statusFromHttp(404, "", "op")));
  EXPECT_FALSE(isRetryable(statusFromHttp(422, "", "op")));
}

TEST(ApiError, RetryAfterSeconds) {
  EXPECT_EQ(parseRetryAfterSeconds("3"), 3);
  EXPECT_EQ(parseRetryAfterSeconds("0"), 0);
  EXPECT_FALSE(parseRetryAfterSeconds("Wed, 21 Oct 2015 07:28:00 GMT").has_value());
  EXPECT_FALSE(parseRetryAfterSeconds("-1").has_value());
}

TEST(Backoff, GrowsWithJitterUpToTheCeiling) {
  Backoff backoff({.initial = std::chrono::milliseconds(100),
                   .max = std::chrono::milliseconds(1000),
                   .factor = 2,
                   .jitter = 0.5},
                  7);
  const long expectedCeilings[] = {100, 200, 400, 800, 1000, 1000};
  for (long ceiling : expectedCeilings) {
    const auto delay = backoff.next().count();
    EXPECT_LE(delay, ceiling);
    EXPECT_GE(delay, ceiling / 2);
  }
  backoff.reset();
  EXPECT_LE(backoff.next().count(), 100);
}

TEST(Resource, Paths) {
  EXPECT_EQ(resourcePath(resources::pods(), "ml", "w-0", "binding"),
            "/api/v1/namespaces/ml/pods/w-0/binding");
  EXPECT_EQ(resourcePath(resources::pods(), ""), "/api/v1/pods");
  EXPECT_EQ(resourcePath(resources::nodes(), "ignored", "n1"), "/api/v1/nodes/n1");
  EXPECT_EQ(resourcePath(resources::datasets(), "ml", "imagenet", "status"),
            "/apis/granary.io/v1alpha1/namespaces/ml/datasets/imagenet/status");
  EXPECT_EQ(resourcePath(resources::leases(), "kube-system"),
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases");
  EXPECT_EQ(percentEncode("app in (a,b),!x"), "app%20in%20%28a%2Cb%29%2C%21x");
}

}  // namespace
}  // namespace granary::kube

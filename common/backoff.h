// Exponential backoff with jitter, for retries and reconnects. Pure apart from the random
// source it is given.
#pragma once

#include <chrono>
#include <random>

namespace granary {

struct BackoffOptions {
  // First delay. Default 100 ms.
  std::chrono::milliseconds initial{100};
  // Ceiling for any delay. Default 30 s.
  std::chrono::milliseconds max{30'000};
  // Growth per attempt. Default 2.
  double factor = 2.0;
  // Each delay is drawn uniformly from [delay * (1 - jitter), delay]. Default 0.5: spreads
  // clients that failed together, so they do not return together.
  double jitter = 0.5;
};

class Backoff {
 public:
  explicit Backoff(BackoffOptions options = {}, unsigned seed = freshSeed())
      : options_(options), random_(seed) {}

  // A seed from a per-thread generator (the system's entropy is read once per thread).
  static unsigned freshSeed() {
    thread_local std::mt19937 seeds{std::random_device{}()};
    return static_cast<unsigned>(seeds());
  }

  // The delay before the next attempt; grows until max.
  std::chrono::milliseconds next();
  // Back to the initial delay (after a success).
  void reset() { attempt_ = 0; }
  int attempts() const { return attempt_; }

 private:
  BackoffOptions options_;
  std::mt19937 random_;
  int attempt_ = 0;
};

}  // namespace granary

// Waiting on a condition in tests, instead of sleeping for a guessed time.
#pragma once

#include <chrono>
#include <functional>

namespace granary::testing {

// Polls `condition` every `poll` until it holds or `limit` passes; true when it held. For state
// that changes on another process's or thread's own schedule (a server, the kernel, a sampler on
// the real clock), which no clock of the test drives. Where the test owns the clock, step a
// FakeClock.
bool eventually(const std::function<bool()>& condition,
                std::chrono::milliseconds limit = std::chrono::seconds(30),
                std::chrono::milliseconds poll = std::chrono::milliseconds(10));

}  // namespace granary::testing

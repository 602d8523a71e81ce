// Readers of a dataset mount for tests and benchmarks: threads that read every file through the
// mount in a loop and compare each with what the origin holds.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/support/eventually.h"

namespace granary::testing {

// Threads reading every file of a dataset through a mount, again and again, each file's pages
// dropped first so that every read reaches the cache node. Counts failures (an error or a wrong
// byte), the longest a single file took, and when each read began and how long it took.
class Readers {
 public:
  Readers(const std::filesystem::path& mount, const std::map<std::string, std::string>& files,
          int threads) {
    for (int t = 0; t < threads; ++t) {
      threads_.emplace_back([this, mount, &files, t](std::stop_token stop) {
        std::vector<std::string> order;
        for (const auto& [path, _] : files) order.push_back(path);
        std::mt19937 random(t);
        std::string data;
        while (!stop.stop_requested()) {
          std::shuffle(order.begin(), order.end(), random);
          for (const auto& path : order) {
            const auto start = std::chrono::steady_clock::now();
            const bool read = readWhole(mount / path, data);
            const int error = errno;
            const bool ok = read && data == files.at(path);
            const auto took = std::chrono::steady_clock::now() - start;
            std::lock_guard lock(mutex_);
            reads_.push_back({start, took});
            (ok ? completed_ : failed_)++;
            if (!ok)
              failures_.push_back(path + ": " + (read ? "wrong bytes" : std::strerror(error)));
            longest_ = std::max(longest_, took);
          }
        }
      });
    }
  }
  void stop() { threads_.clear(); }
  int64_t completed() const {
    std::lock_guard lock(mutex_);
    return completed_;
  }
  // Waits until `more` further files were read (or 60 s pass).
  bool waitFor(int64_t more) const {
    const int64_t target = completed() + more;
    return eventually([&] { return completed() >= target; }, std::chrono::seconds(60));
  }
  int64_t failed() const {
    std::lock_guard lock(mutex_);
    return failed_;
  }
  // After stop().
  const std::vector<std::string>& failures() const { return failures_; }
  std::chrono::steady_clock::duration longest() const { return longest_; }
  // The longest read that was in progress at some moment of [from, to].
  std::chrono::steady_clock::duration longestDuring(
      std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to) const {
    std::lock_guard lock(mutex_);
    std::chrono::steady_clock::duration longest{};
    for (const auto& [began, took] : reads_)
      if (began <= to && began + took >= from) longest = std::max(longest, took);
    return longest;
  }

 private:
  static bool readWhole(const std::filesystem::path& path, std::string& out) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) return false;
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    out.clear();
    char buffer[1 << 16];
    ssize_t got;
    while ((got = ::read(fd, buffer, sizeof buffer)) > 0) out.append(buffer, got);
    ::close(fd);
    return got == 0;
  }

  mutable std::mutex mutex_;
  int64_t completed_ = 0, failed_ = 0;
  std::vector<std::string> failures_;
  std::chrono::steady_clock::duration longest_{};
  std::vector<std::pair<std::chrono::steady_clock::time_point, std::chrono::steady_clock::duration>>
      reads_;  // when each began, how long it took
  std::vector<std::jthread> threads_;
};

}  // namespace granary::testing

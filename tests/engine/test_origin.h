// An Origin wrapper for tests: counts what is read, records the order and when each read ran,
// and fails on request.
#pragma once

#include <algorithm>
#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "common/clock.h"
#include "engine/origin/origin.h"

namespace granary::cache::testing {

class RecordingOrigin final : public Origin {
 public:
  // A read that returned data: when it started and ended (realClock()), and its size.
  struct Fetch {
    Clock::MonoTime start, end;
    int64_t bytes = 0;
  };

  explicit RecordingOrigin(std::unique_ptr<Origin> inner) : inner_(std::move(inner)) {}

  Status list(const std::function<Status(std::vector<OriginObject>&&)>& each) override {
    if (keyOrder) return listRange({}, each);
    ++lists;
    if (beforeList) beforeList();
    if (failLists.load() > 0) {
      --failLists;
      return unavailable("injected origin failure: listing");
    }
    if (!afterListed) return inner_->list(each);
    // One object a batch, and afterListed after each has been handed over.
    return inner_->list([&](std::vector<OriginObject>&& batch) {
      for (auto& object : batch) {
        const std::string path = object.path;
        std::vector<OriginObject> one;
        one.push_back(std::move(object));
        GRANARY_RETURN_IF_ERROR(each(std::move(one)));
        afterListed(path);
      }
      return Status::ok();
    });
  }
  // Called on the listing thread after each object the listing handed over. Set before it
  // starts.
  std::function<void(const std::string& path)> afterListed;
  // Called on the listing thread as each listing starts (after `lists` counts it). Set before.
  std::function<void()> beforeList;

  // Set before the listing starts: list in key order (one object a batch), as S3 does, so that a
  // listing can go on after a path, and split at `directories` (splitAtDirectories); fail a
  // listing once it handed over so many objects (of all its parts).
  bool keyOrder = false;
  std::vector<std::string> directories;
  std::atomic<int> failListAfter{-1};
  bool listsInKeyOrder() const override { return keyOrder; }
  Result<std::vector<KeyRange>> split(size_t parts) override {
    if (!keyOrder) return Origin::split(parts);
    return splitAtDirectories(directories, parts);
  }
  Status listRange(const KeyRange& range,
                   const std::function<Status(std::vector<OriginObject>&&)>& each) override {
    if (!keyOrder) return Origin::listRange(range, each);
    {
      std::lock_guard lock(mutex_);
      listedRanges_.push_back(range);
      mostAtOnce_ = std::max(mostAtOnce_, ++atOnce_);
    }
    const struct Ended {
      RecordingOrigin& self;
      ~Ended() {
        std::lock_guard lock(self.mutex_);
        --self.atOnce_;
      }
    } ended{*this};
    ++lists;
    std::vector<OriginObject> all;
    GRANARY_RETURN_IF_ERROR(inner_->list([&](std::vector<OriginObject>&& batch) {
      for (auto& object : batch) all.push_back(std::move(object));
      return Status::ok();
    }));
    std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
    for (auto& object : all) {
      if (!range.contains(object.path)) continue;
      if (failListAfter.fetch_sub(1) == 0) {
        return unavailable("injected origin failure: listing cut short");
      }
      const std::string path = object.path;
      std::vector<OriginObject> one;
      one.push_back(std::move(object));
      GRANARY_RETURN_IF_ERROR(each(std::move(one)));
      if (afterListed) afterListed(path);
    }
    return Status::ok();
  }
  // The most listings in key order that ran at once.
  int mostListingsAtOnce() const {
    std::lock_guard lock(mutex_);
    return mostAtOnce_;
  }
  // The range of each listing in key order, as asked.
  std::vector<KeyRange> listedRanges() const {
    std::lock_guard lock(mutex_);
    return listedRanges_;
  }

  Result<std::string> read(const std::string& path, int64_t offset, int64_t length,
                           const std::string& etag) override {
    {
      std::lock_guard lock(mutex_);
      reads_.push_back(path);
      if (failReads > 0) {
        --failReads;
        return unavailable("injected origin failure");
      }
    }
    const auto start = realClock().monoNow();
    auto data = inner_->read(path, offset, length, etag);
    if (!data.isOk()) return data;
    bytes += static_cast<int64_t>(data->size());
    const Fetch fetch{start, realClock().monoNow(), static_cast<int64_t>(data->size())};
    {
      std::lock_guard lock(mutex_);
      fetches_.push_back(fetch);
    }
    if (afterRead) afterRead(fetch);
    return data;
  }
  void setRetryGate(RetryGate gate) override { inner_->setRetryGate(std::move(gate)); }

  std::vector<Fetch> fetches() const {
    std::lock_guard lock(mutex_);
    return fetches_;
  }
  // Called on the reading thread after each read that returned data, with it. Set before reads
  // start.
  std::function<void(const Fetch&)> afterRead;

  std::vector<std::string> reads() const {
    std::lock_guard lock(mutex_);
    return reads_;
  }
  void failNext(int count) {
    std::lock_guard lock(mutex_);
    failReads = count;
  }

  std::atomic<int64_t> bytes{0};
  std::atomic<int> lists{0};
  std::atomic<int> failLists{0};  // so many listings fail (Unavailable) before one is tried

 private:
  std::unique_ptr<Origin> inner_;
  mutable std::mutex mutex_;
  std::vector<std::string> reads_;
  std::vector<Fetch> fetches_;
  std::vector<KeyRange> listedRanges_;
  int atOnce_ = 0, mostAtOnce_ = 0;
  int failReads = 0;
};

}  // namespace granary::cache::testing

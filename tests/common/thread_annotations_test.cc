#include "common/thread_annotations.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <future>
#include <optional>
#include <stop_token>
#include <thread>

namespace granary {
namespace {

// The waiting pattern common/thread_annotations.h documents.
class Flag {
 public:
  void set(int value) GRANARY_EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    value_ = value;
    changed_.notify_all();
  }
  // The value once set; nullopt when `stop` comes first.
  std::optional<int> wait(std::stop_token stop) GRANARY_EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    if (!changed_.wait(lock, stop, [this]() GRANARY_REQUIRES(mutex_) { return value_ != 0; }))
      return std::nullopt;
    return value_;
  }

 private:
  Mutex mutex_;
  std::condition_variable_any changed_;  // waits on mutex_
  int value_ GRANARY_GUARDED_BY(mutex_) = 0;
};

TEST(MutexLock, WaitsOnAConditionUntilAnotherThreadSetsIt) {
  Flag flag;
  auto waited = std::async(std::launch::async, [&] { return flag.wait({}); });
  flag.set(7);
  EXPECT_EQ(waited.get(), 7);
}

TEST(MutexLock, WaitEndsWhenStopped) {
  Flag flag;
  std::stop_source stop;
  auto waited = std::async(std::launch::async, [&] { return flag.wait(stop.get_token()); });
  stop.request_stop();
  EXPECT_EQ(waited.get(), std::nullopt);
}

bool lockableFromAnotherThread(Mutex& mutex) {
  return std::async(std::launch::async,
                    [&] {
                      if (!mutex.try_lock()) return false;
                      mutex.unlock();
                      return true;
                    })
      .get();
}

TEST(MutexLock, HoldsTheMutexForItsScopeExceptBetweenUnlockAndLock) {
  Mutex mutex;
  {
    MutexLock lock(mutex);
    EXPECT_FALSE(lockableFromAnotherThread(mutex));
    lock.unlock();
    EXPECT_TRUE(lockableFromAnotherThread(mutex));
    lock.lock();
    EXPECT_FALSE(lockableFromAnotherThread(mutex));
  }
  EXPECT_TRUE(lockableFromAnotherThread(mutex));
  {
    MutexLock lock(mutex);
    lock.unlock();  // left unlocked: the destructor must not unlock again
  }
  EXPECT_TRUE(lockableFromAnotherThread(mutex));
}

TEST(ReaderMutexLock, ReadersShareTheMutexAndAWriterWaitsForThem) {
  SharedMutex mutex;
  std::promise<void> writerStarted;
  std::future<void> writer;
  {
    ReaderMutexLock reader(mutex);
    // A second reader gets in while the first holds the mutex.
    std::async(std::launch::async, [&] { ReaderMutexLock second(mutex); }).get();
    writer = std::async(std::launch::async, [&] {
      writerStarted.set_value();
      WriterMutexLock lock(mutex);
    });
    writerStarted.get_future().wait();
    EXPECT_EQ(writer.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  }
  writer.get();  // the writer got the mutex once the reader let go
}

}  // namespace
}  // namespace granary

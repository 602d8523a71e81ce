#pragma once
// Clang's thread-safety annotations and the mutex types they check.
//
// Under clang with -Wthread-safety (granary's clang builds, see cmake/GranaryCompileOptions.cmake)
// the compiler proves at every access that the guarding mutex is held; under other compilers the
// macros expand to nothing. Names carry a GRANARY_ prefix because abseil (pulled in by gRPC)
// defines the bare ones.
//
// Use:
//   class Queue {
//    public:
//     void push(int v) GRANARY_EXCLUDES(mutex_);
//    private:
//     void trimLocked() GRANARY_REQUIRES(mutex_);   // caller holds mutex_
//     granary::Mutex mutex_;
//     std::condition_variable_any changed_;         // waits on mutex_
//     std::deque<int> items_ GRANARY_GUARDED_BY(mutex_);
//   };
//
// Waiting on a condition: hold a MutexLock and wait on a std::condition_variable_any with it
// (MutexLock is BasicLockable). The predicate is a separate function to the analysis, so it says
// that it runs with the mutex held:
//   granary::MutexLock lock(mutex_);
//   changed_.wait(lock, [this]() GRANARY_REQUIRES(mutex_) { return !items_.empty(); });
// The stop_token overloads (wait(lock, stop, pred), wait_for, wait_until) work the same way.
// Notify after or while holding the lock, as with std::mutex.

#include <mutex>
#include <shared_mutex>

#if defined(__clang__)
#define GRANARY_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define GRANARY_THREAD_ANNOTATION(x)
#endif

// On a class: its objects are a capability (a lock) named `x` in diagnostics.
#define GRANARY_CAPABILITY(x) GRANARY_THREAD_ANNOTATION(capability(x))
// On a class: RAII objects that hold a capability from construction to destruction.
#define GRANARY_SCOPED_CAPABILITY GRANARY_THREAD_ANNOTATION(scoped_lockable)
// On a member: read and written only with `x` held (reads only need it shared).
#define GRANARY_GUARDED_BY(x) GRANARY_THREAD_ANNOTATION(guarded_by(x))
// On a pointer member: what it points to is read and written only with `x` held.
#define GRANARY_PT_GUARDED_BY(x) GRANARY_THREAD_ANNOTATION(pt_guarded_by(x))
// On a function: the caller holds these capabilities exclusively (REQUIRES) or at least shared.
#define GRANARY_REQUIRES(...) GRANARY_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define GRANARY_REQUIRES_SHARED(...) \
  GRANARY_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
// On a function: the caller must not hold these (the function takes them itself).
#define GRANARY_EXCLUDES(...) GRANARY_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
// On a function: it acquires or releases these (no argument: the object itself).
#define GRANARY_ACQUIRE(...) GRANARY_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define GRANARY_ACQUIRE_SHARED(...) \
  GRANARY_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define GRANARY_RELEASE(...) GRANARY_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define GRANARY_RELEASE_SHARED(...) \
  GRANARY_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
// On a function: it acquires the capability when it returns the first argument.
#define GRANARY_TRY_ACQUIRE(...) GRANARY_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
// On a function: the analysis skips its body. Say in a comment why the body is safe.
#define GRANARY_NO_THREAD_SAFETY_ANALYSIS GRANARY_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace granary {

// std::mutex with annotations. Lockable, so std::condition_variable_any and std::unique_lock take
// it, though only MutexLock tells the analysis that the lock is held.
class GRANARY_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() GRANARY_ACQUIRE() { mutex_.lock(); }
  void unlock() GRANARY_RELEASE() { mutex_.unlock(); }
  bool try_lock() GRANARY_TRY_ACQUIRE(true) { return mutex_.try_lock(); }

 private:
  std::mutex mutex_;
};

// std::shared_mutex with annotations: many readers (ReaderMutexLock) or one writer (MutexLock).
class GRANARY_CAPABILITY("mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void lock() GRANARY_ACQUIRE() { mutex_.lock(); }
  void unlock() GRANARY_RELEASE() { mutex_.unlock(); }
  void lock_shared() GRANARY_ACQUIRE_SHARED() { mutex_.lock_shared(); }
  void unlock_shared() GRANARY_RELEASE_SHARED() { mutex_.unlock_shared(); }

 private:
  std::shared_mutex mutex_;
};

// Holds a Mutex (or a SharedMutex exclusively) for its scope. unlock() and lock() release and
// take it again inside the scope; std::condition_variable_any::wait uses them.
template <typename M>
class GRANARY_SCOPED_CAPABILITY BasicMutexLock {
 public:
  explicit BasicMutexLock(M& mutex) GRANARY_ACQUIRE(mutex) : mutex_(mutex) { mutex_.lock(); }
  ~BasicMutexLock() GRANARY_RELEASE() {
    if (held_) mutex_.unlock();
  }
  BasicMutexLock(const BasicMutexLock&) = delete;
  BasicMutexLock& operator=(const BasicMutexLock&) = delete;

  void lock() GRANARY_ACQUIRE() {
    mutex_.lock();
    held_ = true;
  }
  void unlock() GRANARY_RELEASE() {
    held_ = false;
    mutex_.unlock();
  }

 private:
  M& mutex_;
  bool held_ = true;
};

using MutexLock = BasicMutexLock<Mutex>;
using WriterMutexLock = BasicMutexLock<SharedMutex>;

// Holds a SharedMutex shared for its scope.
class GRANARY_SCOPED_CAPABILITY ReaderMutexLock {
 public:
  explicit ReaderMutexLock(SharedMutex& mutex) GRANARY_ACQUIRE_SHARED(mutex) : mutex_(mutex) {
    mutex_.lock_shared();
  }
  ~ReaderMutexLock() GRANARY_RELEASE() { mutex_.unlock_shared(); }
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;

 private:
  SharedMutex& mutex_;
};

}  // namespace granary

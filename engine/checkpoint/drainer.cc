#include "engine/checkpoint/drainer.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <condition_variable>
#include <list>
#include <set>
#include <thread>

#include "common/log.h"
#include "common/owned_fd.h"
#include "common/thread_annotations.h"
#include "engine/checkpoint/drain_record.h"
#include "engine/checkpoint/tree_journal.h"
#include "engine/checkpoint/tree_watch.h"
#include "engine/core/bandwidth_limiter.h"

namespace granary::checkpoint {
namespace {

constexpr std::chrono::seconds kFirstBackoff{1};
constexpr std::chrono::seconds kMaxBackoff{30};

std::optional<FileIdentity> identityOfFd(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_nlink == 0) return std::nullopt;  // or removed
  return identityOf(st);
}

// Whether some process has the file of `fd` open for writing: a read lease is refused then. A
// file a scan of a new directory found is reported closed though its writer may not be done (its
// close may have come before the directory's watch); it must not reach the origin in part. Where
// no lease is to be had (not the file's owner, a file system without leases), false.
bool openForWriting(int fd) {
  ::fcntl(fd, F_SETSIG, SIGURG);  // a lease break meanwhile signals SIGURG, ignored, not SIGIO
  if (::fcntl(fd, F_SETLEASE, F_RDLCK) != 0) return errno == EAGAIN;
  ::fcntl(fd, F_SETLEASE, F_UNLCK);
  return false;
}

class TreeDrainer final : public Drainer {
 public:
  TreeDrainer(DrainerOptions options, std::unique_ptr<OriginWriter> origin, Clock& clock)
      : options_(std::move(options)),
        origin_(std::move(origin)),
        clock_(clock),
        limiter_(clock, options_.bandwidthBytesPerSecond) {}

  ~TreeDrainer() override {
    watch_.reset();  // no more events
    loop_.request_stop();
    changed_.notify_all();
    if (loop_.joinable()) loop_.join();
    std::list<Step> steps;
    {
      MutexLock lock(mutex_);
      steps.swap(steps_);
    }
    for (Step& s : steps) s.thread.request_stop();
  }

  Status begin() {
    GRANARY_ASSIGN_OR_RETURN(const std::vector<OriginEntry> record,
                             readDrainRecord(options_.recordFile));
    {
      MutexLock lock(mutex_);
      journal_.recordAtOrigin(record);
    }
    GRANARY_ASSIGN_OR_RETURN(
        watch_, TreeWatch::start(options_.tree, [this](std::vector<TreeEvent>&& events) {
          apply(std::move(events));
        }));
    {
      MutexLock lock(mutex_);
      journal_.scanDone();
    }
    loop_ = std::jthread([this](std::stop_token stop) { run(stop); });
    return Status::ok();
  }

  DrainStatus status() const override {
    MutexLock lock(mutex_);
    return statusLocked();
  }

  std::vector<TreeJournal::Listed> listing() const override {
    MutexLock lock(mutex_);
    return journal_.listing();
  }

  int64_t evict(int64_t bytes) override {
    MutexLock lock(mutex_);
    int64_t freed = 0;
    for (const TreeFile& file : evictable(journal_.observe(0, 0, 0))) {
      if (freed >= bytes) break;
      const std::filesystem::path path = options_.tree / file.path;
      // The version the journal knows, and no other: one written since is not at the origin.
      if (identityOf(path) != journal_.identity(file.path, file.seq)) continue;
      journal_.evicted(file.path);
      if (::unlink(path.c_str()) != 0) continue;
      freed += file.size;
      counters_.evictedBytes += file.size;
      ++counters_.evictedFiles;
    }
    if (freed > 0) keepRecord();
    return freed;
  }

  bool waitDrained(std::stop_token stop,
                   const std::function<void(const DrainStatus&)>& progress) override {
    MutexLock lock(mutex_);
    while (!journal_.drained()) {
      if (stop.stop_requested()) return false;
      if (progress) {
        const DrainStatus s = statusLocked();
        lock.unlock();
        progress(s);
        lock.lock();
      }
      changed_.wait_for(lock, stop, std::chrono::seconds(1),
                        [&]() GRANARY_REQUIRES(mutex_) { return journal_.drained(); });
    }
    return true;
  }

 private:
  struct Step {
    DrainStep step;
    std::jthread thread;
    bool done = false;
  };

  void apply(std::vector<TreeEvent>&& events) {
    MutexLock lock(mutex_);
    const WallTime now = clock_.wallNow();
    for (TreeEvent& e : events) {
      switch (e.kind) {
        case TreeEvent::Kind::kWriting:
          journal_.writing(e.path);
          break;
        case TreeEvent::Kind::kClosed:
          if (journal_.closed(e.path, e.identity, now)) counters_.writtenBytes += e.identity.size;
          break;
        case TreeEvent::Kind::kRemoved:
          journal_.removed(e.path, e.directory);
          break;
        case TreeEvent::Kind::kLink:
          journal_.linked(e.path);
          break;
        case TreeEvent::Kind::kRescanned:
          for (const TreeFile& f : journal_.observe(0, 0, 0).closed)
            if (!e.all.contains(f.path)) journal_.removed(f.path, false);
          for (const std::string& link : std::set(journal_.links()))
            if (!e.all.contains(link)) journal_.removed(link, false);
          break;
      }
    }
    dirty_ = true;
    changed_.notify_all();
  }

  DrainStatus statusLocked() const GRANARY_REQUIRES(mutex_) {
    const DrainObservation o = journal_.observe(0, options_.maxUploads, 0);
    const DrainPlan plan = planDrain(o);
    DrainStatus s = counters_;
    s.files = static_cast<int64_t>(o.closed.size());
    for (const TreeFile& f : o.closed) {
      const auto held = o.origin.find(f.path);
      if (held != o.origin.end() && held->second == f.seq) continue;
      if (o.held.contains(f.path)) {
        ++s.heldFiles;
        continue;
      }
      ++s.pendingFiles;
      s.pendingBytes += f.size;
    }
    s.pendingRemovals = static_cast<int64_t>(o.removals.size());
    s.writing = static_cast<int64_t>(o.writing.size());
    s.heldMarkers = plan.heldMarkers;
    if (plan.oldestPending)
      s.lag =
          std::max(std::chrono::duration<double>(0),
                   std::chrono::duration<double>(clock_.wallNow() - plan.oldestPending->closedAt));
    s.checkpoints = checkpointsOf(o);
    s.links.assign(journal_.links().begin(), journal_.links().end());
    s.drained = journal_.drained();
    return s;
  }

  // Plans whenever the tree changed or a step ended, and at least once a second.
  void run(std::stop_token stop) {
    MutexLock lock(mutex_);
    while (!stop.stop_requested()) {
      std::erase_if(steps_, [](const Step& s) { return s.done; });  // joins them
      plan();
      changed_.wait_for(lock, stop, std::chrono::seconds(1),
                        [&]() GRANARY_REQUIRES(mutex_) { return dirty_; });
      dirty_ = false;
    }
  }

  void plan() GRANARY_REQUIRES(mutex_) {
    const CopyTargets::Set peers =
        options_.copies ? options_.copies->current() : CopyTargets::Set{};
    if (peers.generation != peersGeneration_) journal_.forgetCopies();
    peersGeneration_ = peers.generation;
    // Nothing starts on a side (the origin, the peers) whose last step failed, until its backoff
    // has passed: an origin that is down delays the copies in nothing, and the other way round.
    const auto now = clock_.monoNow();
    const DrainPlan plan =
        planDrain(journal_.observe(peers.count, now >= backoff_.retryAt ? options_.maxUploads : 0,
                                   now >= copyBackoff_.retryAt ? options_.maxCopies : 0));
    journal_.settle(plan.settled);
    for (const DrainStep& stale : plan.abandon)
      for (Step& s : steps_)
        if (s.step == stale) s.thread.request_stop();
    for (const DrainStep& step : plan.start) {
      journal_.started(step);
      Step& s = steps_.emplace_back(Step{step, {}, false});
      s.thread = std::jthread([this, &s](std::stop_token stop) { carryOut(s, stop); });
    }
  }

  void carryOut(Step& s, std::stop_token stop) {
    std::optional<FileIdentity> identity;
    bool atOrigin = false;
    CopyTargets::Set peers;  // those a copy goes to
    {
      MutexLock lock(mutex_);
      identity = journal_.identity(s.step.path, s.step.seq);
      atOrigin = journal_.isAtOrigin(s.step.path, s.step.seq);
      peers = options_.copies ? options_.copies->current() : CopyTargets::Set{};
    }
    Status result;
    if (s.step.kind == DrainStep::Kind::kRemove) {
      result = origin_->remove(s.step.path);
    } else if (s.step.kind == DrainStep::Kind::kUncopy) {
      result = options_.copies ? options_.copies->removed(s.step.path) : Status::ok();
    } else if (!identity) {
      result = cancelled("no longer in the tree");
    } else if (s.step.kind == DrainStep::Kind::kCopy) {
      result = send(s.step, *identity, stop, [&](int fd, const OriginWriter::Pace& pace) {
        return options_.copies->copy(s.step.path, fd, *identity, atOrigin, pace);
      });
    } else {
      result = send(s.step, *identity, stop, [&](int fd, const OriginWriter::Pace& pace) {
        return origin_->upload(s.step.path, fd, identity->size, pace);
      });
    }
    // The peers hear that the origin holds a version once the journal says so: after its upload,
    // or after a copy sent without the news while its upload ran, so that no copy misses it.
    // News a peer misses costs an upload (should this node be lost), never a byte.
    const bool atOriginNow = finish(s, result, peers, identity ? identity->size : 0);
    if (atOriginNow && !atOrigin && options_.copies)
      if (Status told = options_.copies->atOrigin(s.step.path, *identity); !told.isOk())
        log_.debug("peers not told of an upload", {{"path", s.step.path}, {"error", told}});
    MutexLock lock(mutex_);
    s.done = true;  // the loop may join this thread now
    changed_.notify_all();
  }

  // Sends the version the step names (an upload, paced by the bandwidth limit, or a copy): the
  // file at its path, with the identity the journal has for it, and gives up as soon as either
  // changes (written again, renamed away, removed).
  Status send(const DrainStep& step, const FileIdentity& identity, std::stop_token stop,
              const std::function<Status(int fd, const OriginWriter::Pace& pace)>& to) {
    const std::filesystem::path file = options_.tree / step.path;
    OwnedFd fd(::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    const auto unchanged = [&] {
      if (!fd || identityOfFd(fd.get()) != identity) return false;
      MutexLock lock(mutex_);
      return journal_.identity(step.path, step.seq).has_value();
    };
    if (!unchanged()) return cancelled(step.path + " changed before its upload");
    const bool paced = step.kind == DrainStep::Kind::kUpload;
    bool stillOpen = false;  // found at the last moment: its writer has not closed it
    const auto pace = [&](int64_t bytes) {
      if (bytes == 0 && openForWriting(fd.get())) stillOpen = true;
      return !stillOpen && (!paced || limiter_.acquire(bytes, stop)) && !stop.stop_requested() &&
             unchanged();
    };
    const Status sent = to(fd.get(), pace);
    if (stillOpen) return failedPrecondition(step.path + " is still open for writing");
    return sent;
  }

  // Takes the step's result into the journal; true when the version it sent (of `bytes`) is at
  // the origin now.
  bool finish(const Step& s, const Status& result, const CopyTargets::Set& peers, int64_t bytes) {
    MutexLock lock(mutex_);
    // A copy to a set of peers that changed since counts for nothing. A peer that fails delays
    // the steps at the peers only, the origin those at the origin only.
    const bool stale =
        s.step.kind == DrainStep::Kind::kCopy && peers.generation != peersGeneration_;
    const bool atPeers =
        s.step.kind == DrainStep::Kind::kCopy || s.step.kind == DrainStep::Kind::kUncopy;
    Backoff& backoff = atPeers ? copyBackoff_ : backoff_;
    if (result.isOk() && !stale) {
      journal_.finished(s.step, peers.count);
      switch (s.step.kind) {
        case DrainStep::Kind::kUpload:
          counters_.uploadedBytes += bytes;
          ++counters_.uploadedFiles;
          break;
        case DrainStep::Kind::kCopy:
          counters_.copiedBytes += bytes;
          ++counters_.copiedFiles;
          break;
        case DrainStep::Kind::kRemove:
          ++counters_.removedFiles;
          break;
        case DrainStep::Kind::kUncopy:
          break;
      }
      counters_.lastError.clear();
      backoff.delay = kFirstBackoff;
      keepRecord();
    } else {
      journal_.ended(s.step);
      if (!result.isOk() && result.code() != StatusCode::kCancelled) {
        // A file still open for writing is no failure: it goes again after the backoff, or as
        // its close makes a new version.
        if (result.code() != StatusCode::kFailedPrecondition) {
          ++counters_.failedSteps;
          counters_.lastError = result.message();
          log_.warn("checkpoint drain step failed; trying again",
                    {{"error", result}, {"after", backoff.delay}});
        }
        backoff.retryAt = clock_.monoNow() + backoff.delay;
        backoff.delay = std::min(kMaxBackoff, backoff.delay * 2);
      }
    }
    dirty_ = true;
    changed_.notify_all();
    const bool sent =
        s.step.kind == DrainStep::Kind::kUpload || s.step.kind == DrainStep::Kind::kCopy;
    return result.isOk() && sent && journal_.isAtOrigin(s.step.path, s.step.seq);
  }

  void copyArriving(const std::string& path, const FileIdentity& identity,
                    const std::string& writer, const FileIdentity& source, bool atOrigin) override {
    MutexLock lock(mutex_);
    journal_.copyArriving(path, identity, writer, source, atOrigin);
  }
  void copyAtOrigin(const std::string& writer, const std::string& path,
                    const FileIdentity& source) override {
    changed([&]() GRANARY_REQUIRES(mutex_) {
      journal_.copyAtOrigin(writer, path, source);
      keepRecord();
    });
  }
  std::optional<FileIdentity> copyOf(const std::string& writer, const std::string& path,
                                     bool heldOnly) const override {
    MutexLock lock(mutex_);
    return journal_.copyOf(writer, path, heldOnly);
  }
  void forgetCopy(const std::string& writer, const std::string& path) override {
    MutexLock lock(mutex_);
    journal_.forgetCopy(writer, path);
    keepRecord();
  }
  std::vector<std::string> heldCopies(const std::string& writer) const override {
    MutexLock lock(mutex_);
    return journal_.heldCopies(writer);
  }
  void release(const std::string& writer) override {
    changed([&]() GRANARY_REQUIRES(mutex_) { journal_.release(writer); });
  }

  void keepRecord() GRANARY_REQUIRES(mutex_) {
    if (Status w = writeDrainRecord(options_.recordFile, journal_.record()); !w.isOk())
      log_.error("cannot keep the drain's record", {{"error", w}});
  }

  // Applies a change of the journal and plans again.
  template <typename Change>
  void changed(const Change& change) {
    MutexLock lock(mutex_);
    change();
    dirty_ = true;
    changed_.notify_all();
  }

  const DrainerOptions options_;
  const std::unique_ptr<OriginWriter> origin_;
  Clock& clock_;
  cache::BandwidthLimiter limiter_;
  const Logger log_{"checkpoints"};

  mutable Mutex mutex_;
  TreeJournal journal_ GRANARY_GUARDED_BY(mutex_);
  // A list: each step's thread holds a reference to its entry.
  std::list<Step> steps_ GRANARY_GUARDED_BY(mutex_);
  DrainStatus counters_ GRANARY_GUARDED_BY(mutex_);
  struct Backoff {
    Clock::MonoTime retryAt{};
    std::chrono::seconds delay = kFirstBackoff;
  };
  Backoff backoff_ GRANARY_GUARDED_BY(mutex_);      // of the steps at the origin
  Backoff copyBackoff_ GRANARY_GUARDED_BY(mutex_);  // of the copies
  uint64_t peersGeneration_ GRANARY_GUARDED_BY(mutex_) = 0;

  std::condition_variable_any changed_;            // the tree changed, or a step ended
  bool dirty_ GRANARY_GUARDED_BY(mutex_) = false;  // since the last plan
  std::unique_ptr<TreeWatch> watch_;
  std::jthread loop_;
};

}  // namespace

Result<std::unique_ptr<Drainer>> Drainer::start(DrainerOptions options,
                                                std::unique_ptr<OriginWriter> origin,
                                                Clock& clock) {
  auto drainer = std::make_unique<TreeDrainer>(std::move(options), std::move(origin), clock);
  GRANARY_RETURN_IF_ERROR(drainer->begin());
  return std::unique_ptr<Drainer>(std::move(drainer));
}

}  // namespace granary::checkpoint

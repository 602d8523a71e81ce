#include "cli/local_run.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <optional>

#include "cli/local_checkpoints.h"
#include "cli/run_view.h"
#include "cli/worker_gang.h"
#include "common/api/membership.h"
#include "common/api/rendezvous_notice.h"
#include "common/clock.h"
#include "common/thread_annotations.h"
#include "engine/engine.h"
#include "engine/local_versions.h"
#include "engine/mount/dataset_fs.h"
#include "engine/standalone.h"

namespace granary::cli {
namespace {

using namespace granary::cache;
using namespace std::chrono_literals;
using SteadyTime = Clock::MonoTime;

constexpr auto kTick = 100ms;           // how often exits and output are looked at
constexpr auto kViewPeriod = 1s;        // the live view on a terminal
constexpr auto kPlainPeriod = 5s;       // timestamped lines otherwise
constexpr auto kGpuPeriod = 1s;         // the sampler's interval
constexpr auto kStopGrace = 10s;        // SIGTERM to SIGKILL
constexpr int kDeadlineExitCode = 124;  // as timeout(1)
constexpr int kStoppedExitCode = 130;   // as a shell's Ctrl-C

double secondsBetween(SteadyTime start, SteadyTime end) {
  return std::chrono::duration<double>(end - start).count();
}

// /proc/<tid>/stat's process group: the fifth field, after the command in parentheses.
pid_t processGroupOf(int tid) {
  std::ifstream in("/proc/" + std::to_string(tid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  const size_t close = text.rfind(')');
  char state = 0;
  int parent = 0, group = 0;
  if (close == std::string::npos ||
      std::sscanf(text.c_str() + close + 1, " %c %d %d", &state, &parent, &group) != 3)
    return 0;
  return group;
}

// Which worker a reading thread belongs to: the worker whose process group it is in. Its reads
// are then accounted as the worker's, the way a pod's are on a node.
class WorkerIdentities {
 public:
  static std::string uidOf(const LocalWorker& worker) { return "local/" + worker.name; }

  void assign(const std::vector<pid_t>& groups, const std::vector<LocalWorker>& workers) {
    MutexLock lock(mutex_);
    for (size_t rank = 0; rank < groups.size(); ++rank)
      byGroup_[groups[rank]] = uidOf(workers[rank]);
  }
  ProcessIdentity identify(int tid) {
    ProcessIdentity identity = identifyThread(tid);
    const pid_t group = processGroupOf(tid);
    MutexLock lock(mutex_);
    if (const auto it = byGroup_.find(group); it != byGroup_.end()) identity.podUid = it->second;
    return identity;
  }

 private:
  Mutex mutex_;
  std::map<pid_t, std::string> byGroup_ GRANARY_GUARDED_BY(mutex_);
};

// The terminal's width, or a wide line where there is none.
size_t terminalWidth() {
  winsize size{};
  return ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0 ? size.ws_col : 200;
}

std::string timestamp(Clock::WallTime when) {
  const std::time_t now = std::chrono::system_clock::to_time_t(when);
  char text[16];
  std::strftime(text, sizeof text, "%H:%M:%S", std::localtime(&now));
  return text;
}

// Standard output: worker lines as they come, and the view, redrawn in place on a terminal.
class Screen {
 public:
  explicit Screen(bool live) : live_(live) {}
  void print(const std::string& line) {
    clear();
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);  // a worker's line shows when it comes, on a pipe too
  }
  void draw(const std::vector<std::string>& lines, Clock::WallTime now) {
    clear();
    for (const auto& line : lines)
      std::printf(live_ ? "%s\n" : "[%s] %s\n", live_ ? line.c_str() : timestamp(now).c_str(),
                  line.c_str());
    drawn_ = live_ ? lines.size() : 0;
    std::fflush(stdout);
  }
  bool live() const { return live_; }

 private:
  void clear() {
    if (drawn_ > 0) std::printf("\x1b[%zuA\x1b[J", drawn_);  // up, then erase below
    drawn_ = 0;
  }
  bool live_;
  size_t drawn_ = 0;
};

struct WorkerRecord {
  std::string state = "starting";
  std::string outcome = "not started";
  std::string lastLine;
  int64_t bytes = 0;  // totals at the last view
  std::chrono::nanoseconds wait{0};
  double runSeconds = 0;  // of ended attempts
  double gpuSum = 0;
  int gpuSamples = 0;
};

class LocalRun {
 public:
  LocalRun(const LocalPlan& plan, const LocalRunSettings& settings, const GpuSampler* gpus,
           std::stop_token stop)
      : plan_(plan),
        settings_(settings),
        gpus_(gpus),
        stop_(std::move(stop)),
        screen_(!settings.plain && ::isatty(STDOUT_FILENO)),
        accounting_(
            nullptr, [this](int tid) { return identities_.identify(tid); }, clock_),
        workers_(plan.workers.size()),
        membership_(plan.job.spec.workers, plan.job.spec.workers, clock_.wallNow()) {}

  int run() {
    if (const Status started = start(); !started.isOk()) {
      std::fprintf(stderr, "granaryctl run: %s\n", started.message().c_str());
      return stop_.stop_requested() ? kStoppedExitCode : 1;  // Ctrl-C during a refresh
    }
    const int code = waitForData() ? runAttempts() : finish();
    mounts_.clear();  // unmounts
    if (checkpoints_)
      checkpoints_->drain(stop_, [this](const std::string& line) { screen_.print(line); });
    for (const auto& line : summaryLines(summary())) screen_.print(line);
    screen_.print("  worker output: " + logDirectory().string());
    return code;
  }

 private:
  std::filesystem::path logDirectory() const { return plan_.runDirectory / "logs"; }

  Status start() {
    EngineOptions options{
        .nodeName = "local",
        .stateDirectory = settings_.cacheDirectory,
        .cacheDirectories = {{settings_.cacheDirectory / "chunks", settings_.cacheBytes}}};
    for (const auto& d : plan_.datasets)  // file:// sources read what the user named, only that
      for (auto& named : fileSourcesOf({d.dataset}))
        options.origins.fileOriginRoots.push_back(std::move(named));
    GRANARY_ASSIGN_OR_RETURN(engine_, CacheEngine::open(options, clock_, nullptr, nullptr));
    for (const auto& d : plan_.datasets) GRANARY_RETURN_IF_ERROR(mount(d));
    if (plan_.checkpoints) {
      GRANARY_ASSIGN_OR_RETURN(
          checkpoints_,
          LocalCheckpointVolume::open(*plan_.checkpoints, settings_.cacheDirectory, clock_, stop_,
                                      [this](const std::string& line) { screen_.print(line); }));
    }
    std::filesystem::create_directories(logDirectory());
    for (const auto& w : plan_.workers)
      accounting_.namePod(WorkerIdentities::uidOf(w), plan_.job.metadata.namespace_, w.name);
    return Status::ok();
  }

  Status mount(const LocalDataset& d) {
    cleanStaleMount(d.localPath);  // left by a run that was killed
    for (const auto& m : currentMounts())
      if (m.point == d.localPath.string())
        return failedPrecondition(d.localPath.string() + " is already a mount point (" + m.type +
                                  "), perhaps another granaryctl run's; end it or pass --run-dir");
    EnsureSpec spec = standaloneSpec(d.dataset);
    if (plan_.job.spec.warmPolicy == api::WarmStart::kNone &&
        d.dataset.spec.cache.warm == api::WarmPolicy::kOnJob)
      spec.settings.warm = WarmMode::kNever;
    GRANARY_ASSIGN_OR_RETURN(
        auto fs, DatasetFilesystem::mountPending(spec.key.label(), d.localPath, &accounting_,
                                                 {.allowOther = true}));
    GRANARY_ASSIGN_OR_RETURN(auto cache, ensureNewestVersion(*engine_, spec));
    if (settings_.refresh) {
      const auto say = [&](const std::string& line) {
        screen_.print(spec.key.label() + " " + line);
      };
      GRANARY_ASSIGN_OR_RETURN(
          LocalRefresh refreshed,
          refreshLocally(*engine_, std::move(cache), spec, stop_, listingReporter(say)));
      cache = std::move(refreshed.serving);
      say(refreshed.summary);
      refreshed.summary.insert(0, "; ");
      refreshes_.push_back(std::move(refreshed.summary));
    } else {
      refreshes_.push_back("");
    }
    if (!d.accessOrderFile.empty())  // the job's hint, as SetWarmPlan hands it to a cache node
      cache->setWarmPlan({.accessOrderFile = d.accessOrderFile, .hasReaders = true});
    fs->serve(cache);
    screen_.print(spec.key.label() + " mounted read-only at " + d.localPath.string() + " (" +
                  d.mountPath + " in the job)");
    caches_.push_back(cache);
    retired_.push_back(false);
    mounts_.push_back(std::move(fs));
    return Status::ok();
  }

  // BeforeStart: true once every dataset lets a waiting job start (api::letsWaitingJobsStart:
  // Ready, or settled short of it by its own settings); false when stopped, failed or past the
  // deadline first (exitCode_ and outcome_ say which). Other policies: true at once.
  bool waitForData() {
    if (plan_.job.spec.warmPolicy != api::WarmStart::kBeforeStart) return true;
    for (auto& w : workers_) w.state = "waiting for data";
    while (!shouldEnd()) {
      bool ready = true;
      for (size_t i = 0; i < caches_.size(); ++i) {
        const DatasetState state = caches_[i]->state();
        if (state.phase == Phase::kFailed) {
          setOutcome(1, "Failed: " + caches_[i]->key().label() + " failed (" + state.message + ")");
          return false;
        }
        const api::WarmPolicy warm = plan_.datasets[i].dataset.spec.cache.warm;
        ready = ready && api::letsWaitingJobsStart(state.phase, warm);
      }
      if (ready) return true;
      pump();
    }
    return false;
  }

  int runAttempts() {
    const api::RunPolicy& policy = plan_.job.spec.runPolicy;
    for (attempt_ = 1;; ++attempt_) {
      const std::optional<WorkerExit> failure = runGang();
      if (!failure || shouldEnd()) return finish();
      const std::string what =
          plan_.workers[failure->rank].name + " exited " + std::to_string(failure->code);
      if (!restartable(policy.restartPolicy, failure->code) || restarts_ >= policy.backoffLimit) {
        setOutcome(failure->code, "Failed: " + what);
        return finish();
      }
      ++restarts_;
      membership_.lost(plan_.workers[failure->rank].name, exitCause(failure->code),
                       clock_.wallNow());
      membership_.gangRestart(what, clock_.wallNow());
      screen_.print(what + "; restarting the gang (restart " + std::to_string(restarts_) + " of " +
                    std::to_string(policy.backoffLimit) + ")");
    }
  }

  static bool restartable(api::RestartPolicy policy, int code) {
    switch (policy) {
      case api::RestartPolicy::kOnFailure:
        return true;
      case api::RestartPolicy::kExitCode:
        return code >= 128;
      case api::RestartPolicy::kNever:
        return false;
    }
    return false;
  }

  // One attempt: the gang until every worker exits 0 (nullopt) or a failure ends the attempt
  // (that exit). An elastic job's lost worker ends it only below minWorkers; above, the worker
  // is replaced and the rest go on (loseWorker). The gang is stopped either way.
  std::optional<WorkerExit> runGang() {
    std::unique_ptr<WorkerGang> store;
    if (plan_.rendezvous) {  // a fresh store for each attempt: the rendezvous starts over
      auto started = WorkerGang::start({*plan_.rendezvous}, [this](int, const std::string& line) {
        screen_.print(plan_.rendezvous->name + " | " + line);
      });
      if (!started.isOk()) {
        setOutcome(1, "Failed: the rendezvous store: " + started.status().message());
        return WorkerExit{0, 1};
      }
      store = std::move(*started);
    }
    auto gang = WorkerGang::start(plan_.workers,
                                  [this](int rank, const std::string& line) { take(rank, line); });
    if (!gang.isOk()) {
      setOutcome(1, "Failed: " + gang.status().message());
      return WorkerExit{0, 1};
    }
    identities_.assign((*gang)->groups(), plan_.workers);
    std::vector<SteadyTime> started(plan_.workers.size(), clock_.monoNow());
    for (auto& w : workers_) w.state = "running";
    noteGrowth();
    std::optional<WorkerExit> failure;
    while (!failure && (*gang)->running() > 0 && !shouldEnd()) {
      pump();
      for (const WorkerExit& exit : (*gang)->reap()) {
        recordExit(exit, started[exit.rank]);
        if (exit.code == 0 || failure) continue;
        if (!loseWorker(**gang, exit))
          failure = exit;
        else
          started[exit.rank] = clock_.monoNow();
      }
      if (store && !failure && !store->reap().empty()) {
        setOutcome(1, "Failed: the rendezvous store (" + plan_.rendezvous->name + ") exited");
        failure = WorkerExit{0, 1};
      }
    }
    (*gang)->stop(kStopGrace);
    if (store) store->stop(kStopGrace);
    for (const WorkerExit& exit : (*gang)->reap()) recordExit(exit, started[exit.rank]);
    for (size_t rank = 0; rank < workers_.size(); ++rank)
      if (workers_[rank].state == "running") {
        workers_[rank].state = workers_[rank].outcome = "stopped";
        workers_[rank].runSeconds += secondsSince(started[rank]);
      }
    drainLines();
    return failure;
  }

  // The workers beyond spec.workers that an elastic job grows by (planLocalRun) joined.
  void noteGrowth() {
    const size_t wanted = static_cast<size_t>(plan_.job.spec.workers);
    for (size_t rank = wanted; rank < plan_.workers.size(); ++rank)
      membership_.joined(plan_.workers[rank].name, "growing towards maxWorkers", clock_.wallNow());
    if (plan_.workers.size() > wanted)
      screen_.print("growing towards maxWorkers " +
                    std::to_string(plan_.job.spec.elastic->maxWorkers) + ": " +
                    std::to_string(plan_.workers.size()) + " workers run, " +
                    std::to_string(wanted) + " wanted");
  }

  // An elastic job's worker lost with at least minWorkers left: the others go on (their torchrun
  // agents meet again at the rendezvous) and, while runPolicy allows a restart, the worker
  // starts again and joins them. False when the loss ends the attempt instead.
  bool loseWorker(WorkerGang& gang, const WorkerExit& exit) {
    const api::RunPolicy& policy = plan_.job.spec.runPolicy;
    const api::LossResponse response = api::respondToLoss(
        plan_.job.spec, gang.running(), restartable(policy.restartPolicy, exit.code),
        restarts_ < policy.backoffLimit);
    if (response != api::LossResponse::kReplace && response != api::LossResponse::kContinue)
      return false;
    const std::string& name = plan_.workers[exit.rank].name;
    membership_.lost(name, exitCause(exit.code), clock_.wallNow());
    tellRendezvous(gang.groups()[exit.rank]);
    if (response == api::LossResponse::kContinue) {
      screen_.print(name + " lost (" + exitCause(exit.code) + "); " +
                    std::to_string(gang.running()) + " workers go on without it (runPolicy " +
                    "allows no restart)");
      return true;
    }
    if (const Status replaced = gang.replace(exit.rank); !replaced.isOk()) {
      screen_.print(name + " lost; starting it again failed: " + replaced.message());
      return true;
    }
    ++restarts_;
    identities_.assign(gang.groups(), plan_.workers);
    membership_.joined(name, "replacement", clock_.wallNow());
    workers_[exit.rank].state = "running";
    screen_.print(name + " lost (" + exitCause(exit.code) + "); the other " +
                  std::to_string(gang.running() - 1) + " go on; " + name +
                  " started again to join them (restart " + std::to_string(restarts_) + " of " +
                  std::to_string(policy.backoffLimit) + ")");
    return true;
  }

  // The store hears that the agent of process `pid` is gone, so that the others meet again at once;
  // unheard, they meet once torch's keep-alive lapses.
  void tellRendezvous(pid_t pid) {
    const Status told = api::sendRendezvousNotice(
        plan_.rendezvousNotices, api::rendezvousNotice(plan_.rendezvousId, {{.pid = pid}}),
        plan_.rendezvousToken);
    if (!told.isOk()) screen_.print("the rendezvous store was not told: " + told.message());
  }

  static std::string exitCause(int code) {
    if (code <= 128) return "exit " + std::to_string(code);
    const char* name = sigabbrev_np(code - 128);
    return "killed by " +
           (name ? "SIG" + std::string(name) : "signal " + std::to_string(code - 128));
  }

  void recordExit(const WorkerExit& exit, SteadyTime started) {
    WorkerRecord& w = workers_[exit.rank];
    w.runSeconds += secondsSince(started);
    w.state = "exited " + std::to_string(exit.code);
    w.outcome = "exit " + std::to_string(exit.code);
  }

  // Whether the run is over before its workers are: stopped, past the deadline, or failed.
  bool shouldEnd() {
    if (stop_.stop_requested()) setOutcome(kStoppedExitCode, "Stopped");
    const auto& deadline = plan_.job.spec.runPolicy.activeDeadlineSeconds;
    if (deadline && secondsSince(start_) >= static_cast<double>(*deadline))
      setOutcome(kDeadlineExitCode,
                 "Failed: activeDeadlineSeconds (" + std::to_string(*deadline) + ") passed");
    return exitCode_.has_value();
  }

  // The first outcome set is the run's.
  void setOutcome(int code, std::string outcome) {
    if (exitCode_) return;
    exitCode_ = code;
    outcome_ = std::move(outcome);
  }

  int finish() {
    setOutcome(0, "Succeeded");
    redraw();
    return *exitCode_;
  }

  // Waits a tick, prints the workers' new lines, and refreshes the view when it is time.
  void pump() {
    clock_.sleepFor(kTick, stop_);
    drainLines();
    const auto now = clock_.monoNow();
    if (now - lastGpuSample_ >= kGpuPeriod) {
      lastGpuSample_ = now;
      sampleGpus();
    }
    if (now - lastView_ >= (screen_.live() ? kViewPeriod : kPlainPeriod)) {
      retireOlderVersions();
      if (checkpoints_)
        checkpoints_->makeRoom([this](const std::string& line) { screen_.print(line); });
      redraw();
    }
  }

  // Adds the running workers' GPU utilization to their means.
  void sampleGpus() {
    for (size_t rank = 0; rank < workers_.size(); ++rank) {
      WorkerRecord& w = workers_[rank];
      const auto utilization = gpuUtilization(plan_.workers[rank]);
      if (!utilization || w.state != "running") continue;
      w.gpuSum += *utilization;
      ++w.gpuSamples;
    }
  }

  void take(int rank, const std::string& line) {
    MutexLock lock(linesMutex_);
    lines_.emplace_back(rank, line);
  }

  void drainLines() {
    std::vector<std::pair<int, std::string>> lines;
    {
      MutexLock lock(linesMutex_);
      lines.swap(lines_);
    }
    for (const auto& [rank, line] : lines) {
      const std::string& name = plan_.workers[rank].name;
      std::ofstream(logDirectory() / (name + ".log"), std::ios::app) << line << "\n";
      workers_[rank].lastLine = line;
      screen_.print(name + " | " + line);
    }
  }

  // Purges the versions a refresh left behind, once the one read is Ready.
  void retireOlderVersions() {
    for (size_t i = 0; i < caches_.size(); ++i)
      if (!retired_[i]) retired_[i] = cache::retireOlderVersions(*engine_, *caches_[i]);
  }

  void redraw() {
    const auto now = clock_.monoNow();
    const double period = std::max(1e-3, secondsBetween(lastView_, now));
    lastView_ = now;
    RunView view{.job = label(),
                 .elapsedSeconds = secondsSince(start_),
                 .attempt = attempt_,
                 .attempts = plan_.job.spec.runPolicy.backoffLimit + 1};
    if (plan_.job.spec.elastic)
      view.membership = MembershipView{.running = membership_.running(),
                                       .wanted = membership_.wanted(),
                                       .changes = membership_.changeCount()};
    for (size_t i = 0; i < caches_.size(); ++i)
      view.datasets.push_back(progressLine(caches_[i]->key(), caches_[i]->state()) + refreshes_[i]);
    if (checkpoints_) view.datasets.push_back(checkpoints_->progressLine());
    const auto totals = totalsByWorker();
    for (size_t rank = 0; rank < workers_.size(); ++rank)
      view.workers.push_back(workerView(rank, totals[rank], period));
    screen_.draw(liveViewLines(view, screen_.live() ? terminalWidth() : 400), clock_.wallNow());
  }

  WorkerView workerView(size_t rank, const ReaderTotals& now, double period) {
    WorkerRecord& w = workers_[rank];
    const int64_t bytes = now.reads.localBytes + now.reads.peerBytes + now.reads.originBytes;
    WorkerView view{
        .name = plan_.workers[rank].name,
        .state = w.state,
        .readBytesPerSecond = (bytes - w.bytes) / period,
        .dataWaitShare = std::chrono::duration<double>(now.wait - w.wait).count() / period,
        .gpuUtilization = gpuUtilization(plan_.workers[rank]),
        .lastLine = w.lastLine};
    w.bytes = bytes;
    w.wait = now.wait;
    return view;
  }

  // The mean utilization of the worker's GPUs in the sampler's last reading.
  std::optional<double> gpuUtilization(const LocalWorker& worker) const {
    if (gpus_ == nullptr || worker.gpus.empty()) return std::nullopt;
    double sum = 0;
    int count = 0;
    for (const auto& reading : gpus_->latest())
      for (int index : worker.gpus)
        if (reading.index == index && reading.utilization) sum += *reading.utilization, ++count;
    return count ? std::optional(sum / count) : std::nullopt;
  }

  // Each worker's reads over every dataset, by rank.
  std::vector<ReaderTotals> totalsByWorker() const {
    std::vector<ReaderTotals> totals(plan_.workers.size());
    for (const auto& reader : accounting_.readers())
      for (size_t rank = 0; rank < plan_.workers.size(); ++rank) {
        if (reader.key.podUid != WorkerIdentities::uidOf(plan_.workers[rank])) continue;
        totals[rank].wait += reader.wait;
        totals[rank].reads.localBytes += reader.reads.localBytes;
        totals[rank].reads.peerBytes += reader.reads.peerBytes;
        totals[rank].reads.originBytes += reader.reads.originBytes;
      }
    return totals;
  }

  RunSummary summary() const {
    RunSummary s{.job = label(),
                 .outcome = outcome_,
                 .wallSeconds = secondsSince(start_),
                 .restarts = restarts_};
    if (plan_.job.spec.elastic) {
      s.membership = MembershipSummary{
          .wanted = membership_.wanted(),
          .secondsBelowWanted = membership_.timeBelowWanted(clock_.wallNow()).count(),
          .changes = membership_.changes()};
    }
    for (const auto& cache : caches_)
      s.datasets.push_back(progressLine(cache->key(), cache->state()));
    if (checkpoints_) s.datasets.push_back(checkpoints_->progressLine());
    const auto totals = totalsByWorker();
    for (size_t rank = 0; rank < workers_.size(); ++rank) {
      const WorkerRecord& w = workers_[rank];
      const ReadTotals& r = totals[rank].reads;
      s.localBytes += r.localBytes;
      s.peerBytes += r.peerBytes;
      s.originBytes += r.originBytes;
      s.workers.push_back(
          {.name = plan_.workers[rank].name,
           .outcome = w.outcome,
           .bytesRead = r.localBytes + r.peerBytes + r.originBytes,
           .dataWaitSeconds = std::chrono::duration<double>(totals[rank].wait).count(),
           .runSeconds = w.runSeconds,
           .gpuUtilization = w.gpuSamples ? std::optional(w.gpuSum / w.gpuSamples) : std::nullopt});
    }
    return s;
  }

  double secondsSince(SteadyTime start) const { return secondsBetween(start, clock_.monoNow()); }

  std::string label() const {
    const auto& meta = plan_.job.metadata;
    return (meta.namespace_.empty() ? "default" : meta.namespace_) + "/" + meta.name;
  }

  Clock& clock_ = realClock();  // first: the members below read it
  const LocalPlan& plan_;
  const LocalRunSettings& settings_;
  const GpuSampler* gpus_;
  std::stop_token stop_;
  Screen screen_;
  WorkerIdentities identities_;
  ReaderAccounting accounting_;
  std::unique_ptr<CacheEngine> engine_;
  std::vector<std::shared_ptr<DatasetCache>> caches_;  // the version each dataset's mount serves
  std::vector<std::string> refreshes_;  // what each one's refresh found, for the view ("" none)
  std::vector<bool> retired_;           // whether its older versions are purged
  std::vector<std::unique_ptr<DatasetFilesystem>> mounts_;  // after the engine: unmounted first
  std::unique_ptr<LocalCheckpointVolume> checkpoints_;      // null when the job names none
  std::vector<WorkerRecord> workers_;
  api::Membership membership_;  // workers lost and joined, for the view and the summary
  Mutex linesMutex_;
  // From the gang's output thread.
  std::vector<std::pair<int, std::string>> lines_ GRANARY_GUARDED_BY(linesMutex_);
  const SteadyTime start_ = clock_.monoNow();
  SteadyTime lastView_ = start_;
  SteadyTime lastGpuSample_ = start_;
  int attempt_ = 1;
  int restarts_ = 0;
  std::optional<int> exitCode_;
  std::string outcome_;
};

}  // namespace

int runLocally(const LocalPlan& plan, const LocalRunSettings& settings,
               const cache::GpuSampler* gpus, std::stop_token stop) {
  return LocalRun(plan, settings, gpus, std::move(stop)).run();
}

}  // namespace granary::cli

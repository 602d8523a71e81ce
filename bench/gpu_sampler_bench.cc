// The GPU sampler's CPU cost on a busy node, next to the cost of only asking NVML, measured in
// the same run: 8 fake H100s, every field readable (GPM too), 3 compute processes each (the fake
// NVML of tests/support/fake_nvml.cc, loaded through the same dlopen() as the real library), a fake
// kubelet listing 200 pods (8 own a GPU each, 96 a NIC, 96 no device; it runs in a child process,
// as the kubelet is another process on a node) and a readerWait callback that returns 200 pods.
//
// Each run measures four windows of --seconds, at the same cadence (--interval-ms, 100 ms by
// default), in alternating order: each is this process's CPU time (CLOCK_PROCESS_CPUTIME_ID, every
// thread: gRPC's included) less what the same process spends doing nothing for as long, divided
// by the calls made in it. A window starts after a first call and ends just after a call ends,
// so that no call is cut in two.
//   idle      nothing runs: the process's CPU per second, subtracted from the others;
//   baseline  a thread that only calls gpu::Nvml::read() on the same scenario;
//   parts     a thread that calls what a sample calls out to: Nvml::read(), the kubelet's List
//             (PodResources::gpuOwners()) and the readerWait callback;
//   sampler   a GpuSampler with a metrics registry, kubelet socket and readerWait callback.
// It prints, per run, the sampler's CPU per sample, Nvml::read()'s per call, their ratio and the
// sampler's share of one core at the default 1 s interval, against the goal of under 1 %; then
// where a sample's time goes: sampler − parts is the sampler's own work (attribution,
// starvation, the metric series).
// Usage: gpu_sampler_bench [--repeat N] [--seconds S] [--interval-ms N]
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench/cpu_time.h"
#include "common/clock.h"
#include "common/flags.h"
#include "common/gpu/nvml.h"
#include "common/log.h"
#include "common/metrics.h"
#include "engine/gpu/gpu_sampler.h"
#include "engine/gpu/pod_resources.h"
#include "tests/support/fake_kubelet.h"
#include "tests/support/fake_nvml_scenario.h"

namespace granary {
namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;
using bench::cpuTime;

constexpr int kGpus = 8;
constexpr int kProcessesPerGpu = 3;
constexpr int kPods = 200;
constexpr double kGoalShare = 0.01;  // of one core, at the default 1 s interval
constexpr std::chrono::seconds kDefaultInterval{1};

struct Args {
  int repeat = 3;
  double seconds = 5;
  std::chrono::milliseconds interval{100};
};

std::string uuidOf(int gpu) {
  return "GPU-5e1c0000-0000-4000-8000-00000000000" + std::to_string(gpu);
}

// 8 GPUs, every field readable, each with a few compute processes; utilization differs so that
// some pods are judged idle.
std::string scenarioText() {
  std::string text = "driver 550.54.15\n";
  for (int g = 0; g < kGpus; ++g) {
    text += "gpu " + uuidOf(g) + " NVIDIA_H100_80GB_HBM3 util=" + std::to_string(g % 2 ? 95 : 20) +
            " memutil=40 used=42949672960 total=85899345920 power_mw=450000 temp=61 sm_mhz=1980"
            " tx_kbs=1200000 rx_kbs=9800000 sm_active=70 tensor_active=40\n";
    for (int p = 0; p < kProcessesPerGpu; ++p)
      text += "proc " + std::to_string(g) + " " + std::to_string(10000 + g * 10 + p) +
              " 8589934592 " + std::to_string(30 + p) + "\n";
  }
  return text;
}

// 200 pods: the first 8 own GPU 0..7, then NIC owners and pods with no device, alternately.
std::vector<testing::FakePodGpus> kubeletPods() {
  std::vector<testing::FakePodGpus> pods;
  for (int i = 0; i < kPods; ++i) {
    const std::string n = std::to_string(i);
    if (i < kGpus)
      pods.push_back({"ml", "train-" + n + "-worker-0", "trainer", {uuidOf(i)}});
    else if (i % 2 == 0)
      pods.push_back({"web", "frontend-" + n, "app", {"0000:3b:00." + n}, "example.com/nic"});
    else
      pods.push_back({"batch", "etl-" + n, "main", {}});
  }
  return pods;
}

// The readerWait callback: 200 pods' cumulative waits, growing with time, as the engine would
// give them; counts its calls (a GpuSampler calls it once per sample).
class ReaderWaits {
 public:
  ReaderWaits() {
    for (const auto& pod : kubeletPods()) names_.push_back(pod.podNamespace + "/" + pod.podName);
  }
  std::map<std::string, std::chrono::nanoseconds> operator()() {
    const auto elapsed = Steady::now() - start_;
    std::map<std::string, std::chrono::nanoseconds> waits;
    for (size_t i = 0; i < names_.size(); ++i) waits[names_[i]] = elapsed * (i % 4) / 4;
    calls.fetch_add(1);
    calls.notify_all();
    return waits;
  }
  std::atomic<uint64_t> calls{0};

 private:
  const Steady::time_point start_ = Steady::now();
  std::vector<std::string> names_;
};

// The fake kubelet, in a child process forked before this one starts any thread.
class KubeletProcess {
 public:
  explicit KubeletProcess(std::filesystem::path socket) : socket_(std::move(socket)) {
    int ready[2], done[2];
    if (::pipe(ready) != 0 || ::pipe(done) != 0) std::abort();
    pid_ = ::fork();
    if (pid_ < 0) std::abort();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::close(ready[0]);
      ::close(done[1]);
      {
        testing::FakeKubelet kubelet(socket_);
        kubelet.setPods(kubeletPods());
        if (::write(ready[1], "x", 1) != 1) ::_exit(1);
        char c;
        while (::read(done[0], &c, 1) > 0) {
        }
      }
      ::_exit(0);
    }
    ::close(ready[1]);
    ::close(done[0]);
    done_ = done[1];
    char c;
    if (::read(ready[0], &c, 1) != 1) {
      std::fprintf(stderr, "the fake kubelet did not start\n");
      std::exit(1);
    }
    ::close(ready[0]);
    if (clockid_t clock; ::clock_getcpuclockid(pid_, &clock) == 0) clock_ = clock;
  }
  ~KubeletProcess() {
    ::close(done_);
    ::waitpid(pid_, nullptr, 0);
  }
  const std::filesystem::path& socket() const { return socket_; }
  // The child's CPU time; negative when it cannot be read.
  std::chrono::nanoseconds cpu() const {
    return clock_ ? cpuTime(*clock_) : std::chrono::nanoseconds{-1};
  }

 private:
  std::filesystem::path socket_;
  pid_t pid_ = -1;
  int done_ = -1;
  std::optional<clockid_t> clock_;
};

// One window: this process's CPU, the kubelet's, the wall time and the calls made in it.
struct Window {
  std::chrono::nanoseconds cpu{0}, kubeletCpu{0}, wall{0};
  uint64_t calls = 0;
};

// Measures from now (no call in flight: the caller made sure) until the first call that ends
// after `seconds`; `calls` counts calls as they end (notified).
Window measure(std::atomic<uint64_t>& calls, double seconds, const KubeletProcess& kubelet) {
  const uint64_t before = calls.load();
  const auto wall0 = Steady::now();
  const auto cpu0 = cpuTime(CLOCK_PROCESS_CPUTIME_ID);
  const auto kubelet0 = kubelet.cpu();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  calls.wait(calls.load());           // until the next call is counted...
  std::this_thread::sleep_for(20ms);  // ...and has returned (its thread sleeps until the next)
  Window w;
  w.cpu = cpuTime(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
  w.kubeletCpu = kubelet0.count() < 0 ? kubelet0 : kubelet.cpu() - kubelet0;
  w.wall = Steady::now() - wall0;
  w.calls = calls.load() - before;
  return w;
}

// Calls `call` once, then every `interval` on a thread (as GpuSampler::run does), counting.
class Cadence {
 public:
  Cadence(std::function<void()> call, std::chrono::milliseconds interval) : call_(std::move(call)) {
    tick();
    thread_ = std::jthread([this, interval](std::stop_token stop) {
      while (realClock().sleepUntil(realClock().monoNow() + interval, stop)) tick();
    });
  }
  std::atomic<uint64_t> calls{0};
  // Stops calling; returns once the last call has returned.
  void stop() {
    thread_.request_stop();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void tick() {
    call_();
    calls.fetch_add(1);
    calls.notify_all();
  }
  std::function<void()> call_;
  std::jthread thread_;  // last: stops first
};

double micros(std::chrono::nanoseconds d) { return d.count() / 1e3; }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// "median (min–max)", with `decimals` digits after the point.
std::string spread(const std::vector<double>& v, int decimals) {
  char buffer[128];
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  std::string text;
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, median(v));
  text += buffer;
  text += " (";
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, *lo);
  text += buffer;
  text += "–";
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, *hi);
  text += buffer;
  return text + ")";
}

std::string loadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

struct Run {
  double idlePerSecond = 0;         // µs of CPU per second of doing nothing
  double kubeletIdlePerSecond = 0;  // the same, of the kubelet's process
  Window baseline, parts, sampler;
  double sampler_us = 0, nvml_us = 0, parts_us = 0, kubeletList_us = -1;
  double callback_us = 0;  // thread CPU of one readerWait call, in the parts window
};

int runBench(const Args& args, KubeletProcess& kubelet) {
  configureLogging({.level = LogLevel::kWarn});  // the sampler's start line would split the table
  testing::FakeNvmlScenario scenario;
  scenario.play(scenarioText());
  const std::string library = GRANARY_FAKE_NVML_LIBRARY;

  std::printf(
      "GPU sampler CPU cost: %d fake GPUs × %d compute processes, a kubelet listing %d pods "
      "(%d with a GPU), readerWait of %d pods; calls every %lld ms, windows of %.1f s, %d runs\n",
      kGpus, kProcessesPerGpu, kPods, kGpus, kPods, static_cast<long long>(args.interval.count()),
      args.seconds, args.repeat);
  std::printf("fake NVML: %s; %u CPUs; load average at start %s\n\n", library.c_str(),
              std::thread::hardware_concurrency(), loadAverage().c_str());

  // The windows, each returning what it measured into the run.
  const auto idle = [&](Run& run) {
    const auto wall0 = Steady::now();
    const auto cpu0 = cpuTime(CLOCK_PROCESS_CPUTIME_ID);
    const auto kubelet0 = kubelet.cpu();
    std::this_thread::sleep_for(std::chrono::duration<double>(args.seconds));
    const auto cpu = cpuTime(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
    const auto kubeletCpu = kubelet.cpu() - kubelet0;
    const std::chrono::duration<double> wall = Steady::now() - wall0;
    run.idlePerSecond = micros(cpu) / wall.count();
    run.kubeletIdlePerSecond = micros(kubeletCpu) / wall.count();
    return true;
  };
  const auto baseline = [&](Run& run) {
    auto nvml = gpu::Nvml::open(library);
    if (!nvml.isOk()) {
      std::fprintf(stderr, "NVML: %s\n", nvml.status().message().c_str());
      return false;
    }
    size_t gpus = 0;
    Cadence cadence(
        [&] {
          auto readings = (*nvml)->read();
          gpus = readings.isOk() ? readings->size() : 0;
        },
        args.interval);
    run.baseline = measure(cadence.calls, args.seconds, kubelet);
    cadence.stop();
    if (gpus != kGpus) {
      std::fprintf(stderr, "Nvml::read() saw %zu GPUs, not %d\n", gpus, kGpus);
      return false;
    }
    return true;
  };
  const auto parts = [&](Run& run) {
    auto nvml = gpu::Nvml::open(library);
    if (!nvml.isOk()) return false;
    cache::PodResources pods(kubelet.socket().string());
    ReaderWaits waits;
    size_t owners = 0;
    std::chrono::nanoseconds callbackCpu{0};
    Cadence cadence(
        [&] {
          (void)(*nvml)->read();
          auto owned = pods.gpuOwners();
          owners = owned.isOk() ? owned->size() : 0;
          const auto cpu0 = cpuTime(CLOCK_THREAD_CPUTIME_ID);
          (void)waits();
          callbackCpu += cpuTime(CLOCK_THREAD_CPUTIME_ID) - cpu0;
        },
        args.interval);
    run.parts = measure(cadence.calls, args.seconds, kubelet);
    cadence.stop();
    const uint64_t callbacks = waits.calls.load();
    run.callback_us = micros(callbackCpu) / static_cast<double>(std::max<uint64_t>(callbacks, 1));
    if (owners != kGpus) {
      std::fprintf(stderr, "the kubelet attributed %zu GPUs, not %d\n", owners, kGpus);
      return false;
    }
    return true;
  };
  const auto sampler = [&](Run& run) {
    MetricsRegistry registry;
    ReaderWaits waits;
    auto started = cache::GpuSampler::start({.library = library,
                                             .interval = args.interval,
                                             .hostname = "gpu-node-1",
                                             .podResourcesSocket = kubelet.socket().string(),
                                             .readerWait = [&waits] { return waits(); }},
                                            realClock(), &registry);
    if (!started.isOk()) {
      std::fprintf(stderr, "GpuSampler: %s\n", started.status().message().c_str());
      return false;
    }
    run.sampler = measure(waits.calls, args.seconds, kubelet);
    const auto latest = (*started)->latest();
    const auto attributed = std::count_if(latest.begin(), latest.end(),
                                          [](const auto& r) { return !r.podName.empty(); });
    if (latest.size() != kGpus || attributed != kGpus) {
      std::fprintf(stderr, "the sampler saw %zu GPUs, %td attributed; expected %d\n", latest.size(),
                   attributed, kGpus);
      return false;
    }
    return true;
  };
  std::vector<std::function<bool(Run&)>> windows = {idle, baseline, parts, sampler};

  std::vector<Run> runs;
  std::printf(
      "| run | samples | sampler CPU per sample | baseline calls | Nvml::read() CPU per call | "
      "ratio | sampler's share of a core at 1 s | idle process |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (int r = 0; r < args.repeat; ++r) {
    Run run;
    for (auto& window : windows)
      if (!window(run)) return 1;
    std::reverse(windows.begin(), windows.end());  // every other run in the reverse order
    // Each window less the idle process's CPU over its wall time, per call.
    const auto perCall = [&](const Window& w) {
      const double idleUs = run.idlePerSecond * std::chrono::duration<double>(w.wall).count();
      return (micros(w.cpu) - idleUs) / static_cast<double>(std::max<uint64_t>(w.calls, 1));
    };
    run.sampler_us = perCall(run.sampler);
    run.nvml_us = perCall(run.baseline);
    run.parts_us = perCall(run.parts);
    if (run.parts.kubeletCpu.count() >= 0 && run.sampler.kubeletCpu.count() >= 0) {
      const Window both{.kubeletCpu = run.parts.kubeletCpu + run.sampler.kubeletCpu,
                        .wall = run.parts.wall + run.sampler.wall,
                        .calls = run.parts.calls + run.sampler.calls};
      run.kubeletList_us =
          (micros(both.kubeletCpu) -
           run.kubeletIdlePerSecond * std::chrono::duration<double>(both.wall).count()) /
          static_cast<double>(std::max<uint64_t>(both.calls, 1));
    }
    const double share = run.sampler_us / (micros(kDefaultInterval));
    std::printf("| %d | %llu | %.1f µs | %llu | %.1f µs | %.2f | %.4f %% | %.1f µs/s |\n", r + 1,
                static_cast<unsigned long long>(run.sampler.calls), run.sampler_us,
                static_cast<unsigned long long>(run.baseline.calls), run.nvml_us,
                run.sampler_us / run.nvml_us, share * 100, run.idlePerSecond);
    std::fflush(stdout);
    runs.push_back(run);
  }

  const auto column = [&](auto of) {
    std::vector<double> v;
    for (const auto& run : runs) v.push_back(of(run));
    return v;
  };
  const auto sampler_us = column([](const Run& r) { return r.sampler_us; });
  const auto nvml_us = column([](const Run& r) { return r.nvml_us; });
  const auto ratio = column([](const Run& r) { return r.sampler_us / r.nvml_us; });
  const auto share = column([](const Run& r) { return r.sampler_us / 1e4; });  // % of 1 s
  std::printf("| median (min–max) | | %s µs | | %s µs | %s | %s %% | |\n\n",
              spread(sampler_us, 1).c_str(), spread(nvml_us, 1).c_str(), spread(ratio, 2).c_str(),
              spread(share, 4).c_str());

  std::printf("Where a sample's CPU goes (median (min–max) of the runs, per sample or call):\n");
  std::printf("  Nvml::read(), 8 GPUs (baseline window)                 %s µs\n",
              spread(nvml_us, 1).c_str());
  const auto list_us = column([](const Run& r) { return r.parts_us - r.nvml_us - r.callback_us; });
  std::printf("  kubelet List of %d pods, this process's side            %s µs\n", kPods,
              spread(list_us, 1).c_str());
  std::printf("  readerWait callback, a map of %d pods (thread CPU)      %s µs\n", kPods,
              spread(column([](const Run& r) { return r.callback_us; }), 1).c_str());
  std::printf("  = parts window: the three, called one after another     %s µs\n",
              spread(column([](const Run& r) { return r.parts_us; }), 1).c_str());
  std::printf("  sampler − parts: attribution, starvation, metric series %s µs\n",
              spread(column([](const Run& r) { return r.sampler_us - r.parts_us; }), 1).c_str());
  if (runs.front().kubeletList_us >= 0)
    std::printf(
        "  (not counted above) the kubelet's side of a List        %s µs, in its own "
        "process\n",
        spread(column([](const Run& r) { return r.kubeletList_us; }), 1).c_str());
  std::printf("  idle process, subtracted from every window              %s µs per second\n\n",
              spread(column([](const Run& r) { return r.idlePerSecond; }), 1).c_str());

  const double worst = *std::max_element(share.begin(), share.end());
  const auto over =
      std::count_if(share.begin(), share.end(), [](double s) { return s >= kGoalShare * 100; });
  std::printf("Goal: the sampler under %.0f %% of one core at the default 1 s interval: ",
              kGoalShare * 100);
  if (over == 0)
    std::printf("met in every run (median %.4f %%, worst %.4f %%).\n", median(share), worst);
  else
    std::printf("NOT MET in %td of %zu runs (median %.4f %%, worst %.4f %%).\n", over, share.size(),
                median(share), worst);
  std::printf("load average at the end %s\n", loadAverage().c_str());
  return 0;
}

void addFlags(CLI::App& app, Args& args) {
  app.add_option("--repeat", args.repeat, "runs of the four windows")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  app.add_option("--seconds", args.seconds, "length of each window")
      ->capture_default_str()
      ->check(CLI::Range(0.5, 3600.0));
  app.add_option_function<int>(
         "--interval-ms", [&args](int ms) { args.interval = std::chrono::milliseconds(ms); },
         "the cadence of the calls in each window (default: 100)")
      ->check(CLI::Range(1, 60'000));
}

}  // namespace
}  // namespace granary

int main(int argc, char** argv) {
  granary::Args args;
  CLI::App app("The GPU sampler's CPU per sample on a busy node, next to Nvml::read() alone.",
               "gpu_sampler_bench");
  granary::addFlags(app, args);
  if (auto code = granary::parseCommandLine(app, argc, argv)) return *code;
  // Forked before this process starts a thread (gRPC's included).
  granary::KubeletProcess kubelet(
      std::filesystem::temp_directory_path() /
      ("granary-bench-kubelet-" + std::to_string(::getpid()) + ".sock"));
  return granary::runBench(args, kubelet);
}

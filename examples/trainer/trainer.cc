// granary-trainer: stands in for a training job in demos and benchmarks. It reads a dataset
// as a PyTorch DataLoader does (reader threads, batches, a bounded prefetch queue, a shard per
// rank, a fresh shuffle per epoch), spends a set time per sample on a modelled accelerator,
// and reports per epoch the throughput, the time to the first batch, the time spent waiting
// for data and the accelerator utilization (compute time ÷ epoch time, as MLPerf Storage
// defines it).
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/flags.h"
#include "examples/trainer/compute.h"
#include "examples/trainer/loader.h"
#include "examples/trainer/samples.h"

namespace {

using granary::Result;
using granary::Status;
using granary::trainer::Accelerator;
using granary::trainer::EpochLoader;
using granary::trainer::LoaderOptions;
using granary::trainer::RankOf;
using SteadyClock = std::chrono::steady_clock;

constexpr const char* kName = "granary-trainer";
constexpr int kUsageError = 2;    // bad flags or environment: nothing was read
constexpr int kRuntimeError = 1;  // a file could not be read, or the GPU failed

struct TrainerOptions {
  std::string data;      // --data: the dataset directory; required
  int epochs = 2;        // --epochs: passes over the dataset
  LoaderOptions loader;  // --batch-size, --readers, --prefetch
  // --compute-ms: modelled accelerator time per sample, in milliseconds; 0 measures the
  // loader alone. Default 10.
  double computeMs = 10;
  uint64_t seed = 0;   // --seed: the shuffle's seed, shared by every rank
  std::string report;  // --report: a file to append one JSON object per epoch to; "" for none
};

// What one epoch took on this rank. Times in seconds from the epoch's start (when loading for
// it began).
struct EpochResult {
  size_t samples = 0;
  uint64_t bytes = 0;
  double seconds = 0;            // until the last batch was computed
  double firstBatchSeconds = 0;  // until the first batch was ready to compute
  double dataWaitSeconds = 0;    // the training loop's time waiting for batches
  double computeSeconds = 0;     // the accelerator's time on batches

  double samplesPerSecond() const {
    return seconds > 0 ? static_cast<double>(samples) / seconds : 0;
  }
  double utilization() const { return seconds > 0 ? computeSeconds / seconds : 0; }
};

// "" when `text` is a whole number in [min, max]; otherwise what is wrong and the fix.
std::string checkWholeNumber(std::string_view text, long long min, long long max,
                             std::string_view example) {
  long long value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error == std::errc() && end == text.data() + text.size() && value >= min && value <= max) {
    return "";
  }
  return "\"" + std::string(text) + "\" is not a whole number from " + std::to_string(min) +
         " to " + std::to_string(max) + "; give one, e.g. " + std::string(example);
}

std::function<std::string(const std::string&)> wholeNumber(long long min, long long max,
                                                           std::string example) {
  return [=](const std::string& text) { return checkWholeNumber(text, min, max, example); };
}

// --compute-ms: a finite number of milliseconds from 0 to an hour.
std::string checkMilliseconds(const std::string& text) {
  constexpr double kMax = 3'600'000;
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error == std::errc() && end == text.data() + text.size() && std::isfinite(value) &&
      value >= 0 && value <= kMax) {
    return "";
  }
  return "\"" + text + "\" is not a number of milliseconds from 0 to 3600000; give one, e.g. " +
         "--compute-ms 10 or --compute-ms 0.5 (0 measures the loader alone)";
}

void addFlags(CLI::App& app, TrainerOptions& options) {
  constexpr long long kIntMax = std::numeric_limits<int>::max();
  app.add_option("--data", options.data,
                 "dataset directory; every regular file under it, recursively, is a sample "
                 "(required)");
  app.add_option("--epochs", options.epochs, "passes over the dataset (default 2)")
      ->check(wholeNumber(1, kIntMax, "--epochs 2"));
  app.add_option("--batch-size", options.loader.batchSize,
                 "samples per batch; an epoch's last batch may be short (default 8)")
      ->check(wholeNumber(1, 1 << 20, "--batch-size 8"));
  app.add_option("--readers", options.loader.readers,
                 "reader threads, like DataLoader's num_workers (default 4)")
      ->check(wholeNumber(1, 1024, "--readers 4"));
  app.add_option("--prefetch", options.loader.prefetch,
                 "batches queued per reader, like DataLoader's prefetch_factor (default 2)")
      ->check(wholeNumber(1, 1024, "--prefetch 2"));
  app.add_option("--compute-ms", options.computeMs,
                 "modelled accelerator time per sample in milliseconds, fractional or 0 "
                 "(default 10)")
      ->check(checkMilliseconds);
  app.add_option("--seed", options.seed, "shuffle seed; every rank must use the same (default 0)")
      ->check(wholeNumber(0, std::numeric_limits<long long>::max(), "--seed 0"));
  app.add_option("--report", options.report,
                 "append one JSON object per epoch to this file (JSON Lines)");
  app.footer(
      "Environment: RANK (default 0) and WORLD_SIZE (default 1) shard each epoch across ranks: "
      "all ranks shuffle alike and rank r reads every WORLD_SIZE-th sample from position r.");
}

// A usage error: "granary-trainer: <what>" on standard error.
int usageError(const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", kName, message.c_str());
  return kUsageError;
}

// An environment variable as a whole number in [min, max], or `fallback` when unset.
Result<int> intFromEnvironment(const char* name, int fallback, int min, int max) {
  const char* text = std::getenv(name);
  if (text == nullptr) return fallback;
  if (std::string problem =
          checkWholeNumber(text, min, max, std::string(name) + "=" + std::to_string(fallback));
      !problem.empty()) {
    return granary::invalidArgument(std::string(name) + ": " + problem);
  }
  return std::atoi(text);
}

// RANK and WORLD_SIZE, as torchrun sets them.
Result<RankOf> rankFromEnvironment() {
  GRANARY_ASSIGN_OR_RETURN(const int worldSize, intFromEnvironment("WORLD_SIZE", 1, 1, 1 << 20));
  GRANARY_ASSIGN_OR_RETURN(const int rank, intFromEnvironment("RANK", 0, 0, worldSize - 1));
  return RankOf{.rank = rank, .worldSize = worldSize};
}

double secondsBetween(SteadyClock::time_point from, SteadyClock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// Loads `shard` and computes on every batch of it, timing both.
Result<EpochResult> runEpoch(std::vector<std::filesystem::path> shard,
                             const TrainerOptions& options, Accelerator& accelerator) {
  const std::chrono::duration<double, std::milli> perSample(options.computeMs);
  EpochResult result;
  const auto start = SteadyClock::now();
  auto lastComputed = start;
  EpochLoader loader(std::move(shard), options.loader);
  while (true) {
    const auto waitStart = SteadyClock::now();
    GRANARY_ASSIGN_OR_RETURN(std::optional<granary::trainer::Batch> batch, loader.next());
    const auto ready = SteadyClock::now();
    if (!batch) break;
    if (result.samples == 0) result.firstBatchSeconds = secondsBetween(start, ready);
    result.dataWaitSeconds += secondsBetween(waitStart, ready);
    const auto duration = std::chrono::duration_cast<std::chrono::nanoseconds>(
        perSample * static_cast<double>(batch->samples));
    GRANARY_RETURN_IF_ERROR(accelerator.compute(*batch, duration));
    lastComputed = SteadyClock::now();
    result.computeSeconds += secondsBetween(ready, lastComputed);
    result.samples += batch->samples;
    result.bytes += batch->bytes.size();
  }
  result.seconds = secondsBetween(start, lastComputed);
  return result;
}

void printEpoch(int epoch, int epochs, const EpochResult& result) {
  std::printf(
      "epoch %d/%d: %zu samples, %.1f MiB in %.2f s, %.2f samples/s, first batch %.3f s, "
      "data wait %.2f s, accelerator utilization %.3f\n",
      epoch, epochs, result.samples, static_cast<double>(result.bytes) / (1 << 20), result.seconds,
      result.samplesPerSecond(), result.firstBatchSeconds, result.dataWaitSeconds,
      result.utilization());
  std::fflush(stdout);
}

// Appends one JSON object (one line) for the epoch and flushes it.
void reportEpoch(std::FILE* report, const RankOf& rank, int epoch, const EpochResult& result,
                 std::string_view device) {
  std::fprintf(report,
               "{\"rank\":%d,\"worldSize\":%d,\"epoch\":%d,\"samples\":%zu,\"bytes\":%llu,"
               "\"seconds\":%.6f,\"samplesPerSecond\":%.6f,\"firstBatchSeconds\":%.6f,"
               "\"dataWaitSeconds\":%.6f,\"computeSeconds\":%.6f,"
               "\"acceleratorUtilization\":%.6f,\"device\":\"%.*s\"}\n",
               rank.rank, rank.worldSize, epoch, result.samples,
               static_cast<unsigned long long>(result.bytes), result.seconds,
               result.samplesPerSecond(), result.firstBatchSeconds, result.dataWaitSeconds,
               result.computeSeconds, result.utilization(), static_cast<int>(device.size()),
               device.data());
  std::fflush(report);
}

// Closes the report file when main returns.
struct FileCloser {
  void operator()(std::FILE* file) const { std::fclose(file); }
};
using ReportFile = std::unique_ptr<std::FILE, FileCloser>;

}  // namespace

int main(int argc, char** argv) {
  TrainerOptions options;
  CLI::App app(
      "Reads a dataset as a training job would and reports per epoch how well the "
      "storage kept a modelled accelerator busy.",
      kName);
  addFlags(app, options);
  if (auto exitCode = granary::parseCommandLine(app, argc, argv)) return *exitCode;
  if (options.data.empty()) {
    return usageError("--data: no dataset directory given; pass --data DIR");
  }
  auto rank = rankFromEnvironment();
  if (!rank.isOk()) return usageError(rank.status().message());
  auto samples = granary::trainer::listSamples(options.data);
  if (!samples.isOk()) return usageError("--data: " + samples.status().message());
  const size_t shardSize = granary::trainer::epochShard(*samples, options.seed, 1, *rank).size();
  if (shardSize == 0) {
    return usageError("WORLD_SIZE: " + std::to_string(rank->worldSize) + " ranks share only " +
                      std::to_string(samples->size()) +
                      " samples, so this rank would read none; use more files or fewer ranks");
  }
  ReportFile report;
  if (!options.report.empty()) {
    report.reset(std::fopen(options.report.c_str(), "a"));
    if (!report) {
      return usageError("--report: cannot open " + options.report +
                        " for appending: " + std::strerror(errno));
    }
  }

  const std::unique_ptr<Accelerator> accelerator = granary::trainer::openAccelerator();
  std::fprintf(stderr, "%s: rank %d/%d, %zu of %zu samples per epoch, computing on %s\n", kName,
               rank->rank, rank->worldSize, shardSize, samples->size(),
               accelerator->description().c_str());
  for (int epoch = 1; epoch <= options.epochs; ++epoch) {
    auto result = runEpoch(granary::trainer::epochShard(*samples, options.seed, epoch, *rank),
                           options, *accelerator);
    if (!result.isOk()) {
      std::fprintf(stderr, "%s: epoch %d: %s\n", kName, epoch, result.status().message().c_str());
      return kRuntimeError;
    }
    printEpoch(epoch, options.epochs, *result);
    if (report) reportEpoch(report.get(), *rank, epoch, *result, accelerator->kind());
  }
  return 0;
}

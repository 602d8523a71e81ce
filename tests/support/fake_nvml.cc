// A fake of NVML (libnvidia-ml.so.1) for tests and benchmarks: a shared library exporting the
// entry points granary resolves, loaded through the same dlopen() path as the real one. It
// plays the scenario in the file named by GRANARY_FAKE_NVML, read again at every device count
// (so a test can change it mid-run), one directive a line:
//   init CODE                   nvmlInit_v2's result (default 0: success)
//   driver VERSION
//   gpu UUID NAME [KEY=VALUE...] [lost]   NAME with '_' for spaces; keys: util memutil (percent),
//                               used total (bytes), power_mw, temp, sm_mhz, tx_kbs, rx_kbs,
//                               sm_active tensor_active (GPM, percent),
//                               unsupported=FIELD,... (power temp sm pcie util memory name gpm)
//   proc GPU PID USED_BYTES SM_PERCENT
// A missing file or variable: NVML starts and sees no GPU.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr int kSuccess = 0, kInvalidArgument = 2, kNotSupported = 3, kNotFound = 6,
              kInsufficientSize = 7, kGpuIsLost = 15;

struct Process {
  unsigned pid = 0;
  unsigned long long used = 0;
  unsigned sm = 0;
};

struct Gpu {
  std::string uuid, name;
  std::map<std::string, unsigned long long> values;
  std::set<std::string> unsupported;
  bool lost = false;
  std::vector<Process> processes;
};

struct Scenario {
  int init = kSuccess;
  std::string driver = "550.54.15";
  std::vector<Gpu> gpus;
};

std::mutex mutex;
Scenario scenario;

void load() {
  Scenario next;
  const char* file = std::getenv("GRANARY_FAKE_NVML");
  std::ifstream in(file ? file : "");
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string directive;
    words >> directive;
    if (directive == "init") {
      words >> next.init;
    } else if (directive == "driver") {
      words >> next.driver;
    } else if (directive == "gpu") {
      Gpu gpu;
      words >> gpu.uuid >> gpu.name;
      for (char& c : gpu.name) c = c == '_' ? ' ' : c;
      for (std::string word; words >> word;) {
        const auto equals = word.find('=');
        if (word == "lost") {
          gpu.lost = true;
        } else if (word.starts_with("unsupported=")) {
          std::istringstream fields(word.substr(equals + 1));
          for (std::string field; std::getline(fields, field, ',');) gpu.unsupported.insert(field);
        } else if (equals != std::string::npos) {
          gpu.values[word.substr(0, equals)] = std::stoull(word.substr(equals + 1));
        }
      }
      next.gpus.push_back(std::move(gpu));
    } else if (directive == "proc") {
      size_t index;
      Process process;
      words >> index >> process.pid >> process.used >> process.sm;
      if (index < next.gpus.size()) next.gpus[index].processes.push_back(process);
    }
  }
  scenario = std::move(next);
}

// The GPU behind a handle (index + 1), or null.
const Gpu* gpuOf(void* device) {
  const auto index = reinterpret_cast<uintptr_t>(device);
  return index >= 1 && index <= scenario.gpus.size() ? &scenario.gpus[index - 1] : nullptr;
}

// Why `field` of `device` cannot be read (0: it can).
int refusal(void* device, const char* field) {
  const Gpu* gpu = gpuOf(device);
  if (gpu == nullptr) return kInvalidArgument;
  if (gpu->lost) return kGpuIsLost;
  return gpu->unsupported.contains(field) ? kNotSupported : kSuccess;
}

unsigned valueOf(void* device, const char* key) {
  const auto& values = gpuOf(device)->values;
  const auto it = values.find(key);
  return it == values.end() ? 0 : static_cast<unsigned>(it->second);
}

int copy(const std::string& text, char* into, unsigned length) {
  if (text.size() + 1 > length) return kInsufficientSize;
  std::memcpy(into, text.c_str(), text.size() + 1);
  return kSuccess;
}

struct Utilization {
  unsigned gpu, memory;
};
struct Memory {
  unsigned long long total, free, used;
};
struct ProcessInfo {
  unsigned pid;
  unsigned long long usedGpuMemory;
  unsigned gpuInstanceId, computeInstanceId;
};
struct ProcessSample {
  unsigned pid;
  unsigned long long timeStamp;
  unsigned smUtil, memUtil, encUtil, decUtil;
};
// A GPM sample: the GPU's activity when it was taken (what the driver would count up to then).
struct GpmSample {
  bool taken = false;
  unsigned smActive = 0, tensorActive = 0;
};
struct GpmSupport {
  unsigned version, isSupportedDevice;
};
struct GpmMetric {
  unsigned metricId;
  int nvmlReturn;
  double value;
  char *shortName, *longName, *unit;
};
struct GpmMetricsGet {
  unsigned version, numMetrics;
  GpmSample *sample1, *sample2;
  GpmMetric metrics[256];  // the caller gives room for numMetrics of them
};

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int nvmlInit_v2() {
  const std::lock_guard lock(mutex);
  load();
  return scenario.init;
}

__attribute__((visibility("default"))) int nvmlShutdown() { return kSuccess; }

__attribute__((visibility("default"))) const char* nvmlErrorString(int result) {
  switch (result) {
    case kSuccess:
      return "Success";
    case 9:
      return "Driver Not Loaded";
    case kGpuIsLost:
      return "GPU is lost";
    case kNotSupported:
      return "Not Supported";
    default:
      return "Unknown Error";
  }
}

__attribute__((visibility("default"))) int nvmlSystemGetDriverVersion(char* version,
                                                                      unsigned length) {
  const std::lock_guard lock(mutex);
  return copy(scenario.driver, version, length);
}

__attribute__((visibility("default"))) int nvmlDeviceGetCount_v2(unsigned* count) {
  const std::lock_guard lock(mutex);
  load();
  *count = static_cast<unsigned>(scenario.gpus.size());
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetHandleByIndex_v2(unsigned index,
                                                                         void** device) {
  const std::lock_guard lock(mutex);
  if (index >= scenario.gpus.size()) return kInvalidArgument;
  *device = reinterpret_cast<void*>(uintptr_t{index} + 1);
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetUUID(void* device, char* uuid,
                                                             unsigned length) {
  const std::lock_guard lock(mutex);
  if (int refused = refusal(device, "uuid")) return refused;
  return copy(gpuOf(device)->uuid, uuid, length);
}

__attribute__((visibility("default"))) int nvmlDeviceGetName(void* device, char* name,
                                                             unsigned length) {
  const std::lock_guard lock(mutex);
  if (int refused = refusal(device, "name")) return refused;
  return copy(gpuOf(device)->name, name, length);
}

__attribute__((visibility("default"))) int nvmlDeviceGetUtilizationRates(void* device,
                                                                         Utilization* rates) {
  const std::lock_guard lock(mutex);
  if (int refused = refusal(device, "util")) return refused;
  *rates = {valueOf(device, "util"), valueOf(device, "memutil")};
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetMemoryInfo(void* device, Memory* memory) {
  const std::lock_guard lock(mutex);
  if (int refused = refusal(device, "memory")) return refused;
  const auto& values = gpuOf(device)->values;
  const unsigned long long total = values.contains("total") ? values.at("total") : 0;
  const unsigned long long used = values.contains("used") ? values.at("used") : 0;
  *memory = {total, total - used, used};
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetPowerUsage(void* device, unsigned* mw) {
  const std::lock_guard lock(mutex);
  if (int refused = refusal(device, "power")) return refused;
  *mw = valueOf(device, "power_mw");
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetTemperature(void* device, unsigned,
                                                                    unsigned* celsius) {
  const std::lock_guard lock(mutex);
  if (int refused = refusal(device, "temp")) return refused;
  *celsius = valueOf(device, "temp");
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetClockInfo(void* device, unsigned,
                                                                  unsigned* mhz) {
  const std::lock_guard lock(mutex);
  if (int refused = refusal(device, "sm")) return refused;
  *mhz = valueOf(device, "sm_mhz");
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetPcieThroughput(void* device,
                                                                       unsigned counter,
                                                                       unsigned* kbs) {
  const std::lock_guard lock(mutex);
  if (int refused = refusal(device, "pcie")) return refused;
  *kbs = valueOf(device, counter == 0 ? "tx_kbs" : "rx_kbs");
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetComputeRunningProcesses_v3(
    void* device, unsigned* count, ProcessInfo* infos) {
  const std::lock_guard lock(mutex);
  if (int refused = refusal(device, "processes")) return refused;
  const auto& processes = gpuOf(device)->processes;
  const unsigned room = *count;
  *count = static_cast<unsigned>(processes.size());
  if (infos == nullptr || room < processes.size())
    return processes.empty() ? kSuccess : kInsufficientSize;
  for (size_t i = 0; i < processes.size(); ++i)
    infos[i] = {processes[i].pid, processes[i].used, ~0u, ~0u};
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetProcessUtilization(
    void* device, ProcessSample* samples, unsigned* count, unsigned long long since) {
  const std::lock_guard lock(mutex);
  if (int refused = refusal(device, "processes")) return refused;
  const auto& processes = gpuOf(device)->processes;
  const auto now =
      static_cast<unsigned long long>(std::chrono::duration_cast<std::chrono::microseconds>(
                                          std::chrono::steady_clock::now().time_since_epoch())
                                          .count());
  if (processes.empty() || now <= since) return kNotFound;
  const unsigned room = *count;
  *count = static_cast<unsigned>(processes.size());
  if (samples == nullptr || room < processes.size()) return kInsufficientSize;
  for (size_t i = 0; i < processes.size(); ++i)
    samples[i] = {processes[i].pid, now, processes[i].sm, 0, 0, 0};
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlGpmQueryDeviceSupport(void* device,
                                                                     GpmSupport* support) {
  const std::lock_guard lock(mutex);
  if (support == nullptr || support->version != 1) return kInvalidArgument;
  const int refused = refusal(device, "gpm");
  if (refused != kSuccess && refused != kNotSupported) return refused;
  support->isSupportedDevice = refused == kSuccess ? 1 : 0;
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlGpmSampleAlloc(GpmSample** sample) {
  *sample = new GpmSample();
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlGpmSampleFree(GpmSample* sample) {
  delete sample;
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlGpmSampleGet(void* device, GpmSample* sample) {
  const std::lock_guard lock(mutex);
  if (int refused = refusal(device, "gpm")) return refused;
  *sample = {true, valueOf(device, "sm_active"), valueOf(device, "tensor_active")};
  return kSuccess;
}

// Each metric over the two samples: the later sample's scripted activity.
__attribute__((visibility("default"))) int nvmlGpmMetricsGet(GpmMetricsGet* get) {
  if (get == nullptr || get->version != 1 || get->sample1 == nullptr || get->sample2 == nullptr ||
      !get->sample1->taken || !get->sample2->taken)
    return kInvalidArgument;
  for (unsigned i = 0; i < get->numMetrics; ++i) {
    GpmMetric& metric = get->metrics[i];
    metric.nvmlReturn = kSuccess;
    if (metric.metricId == 2)  // NVML_GPM_METRIC_SM_UTIL
      metric.value = get->sample2->smActive;
    else if (metric.metricId == 5)  // NVML_GPM_METRIC_ANY_TENSOR_UTIL
      metric.value = get->sample2->tensorActive;
    else
      metric.nvmlReturn = kNotSupported;
  }
  return kSuccess;
}

}  // extern "C"

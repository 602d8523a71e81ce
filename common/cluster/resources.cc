#include "common/cluster/resources.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/quantity.h"

namespace granary::cluster {
namespace {

// Parses a quantity to a count (memory, pods, GPUs): "8", "200Gi", "1.5G", "2e3".
Result<int64_t> parseCount(const std::string& text) {
  GRANARY_ASSIGN_OR_RETURN(ByteSize size, parseByteSize(text));
  return size.bytes;
}

// Parses a CPU quantity to millicores: "500m", "2", "1.5".
Result<int64_t> parseMilliCpu(const std::string& text) {
  if (!text.empty() && text.back() == 'm') {
    GRANARY_ASSIGN_OR_RETURN(int64_t milli, parseCount(text.substr(0, text.size() - 1)));
    return milli;
  }
  char* end = nullptr;
  const double cores = std::strtod(text.c_str(), &end);
  // Beyond kMaxCores the millicores do not fit in an int64_t.
  constexpr double kMaxCores = 9e15;
  if (text.empty() || *end != '\0' || cores < 0 || !std::isfinite(cores) || cores > kMaxCores) {
    return invalidArgument("cpu quantity \"" + text + "\" is not valid; write 500m or 2");
  }
  return static_cast<int64_t>(std::ceil(cores * 1000 - 1e-9));
}

// Sums and differences saturate at int64_t's range: requests come from pods as written, and two
// containers asking 7Ei each overflowed (undefined) where the pod should simply fit nowhere.
int64_t plus(int64_t a, int64_t b) {
  int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) {
    return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  }
  return sum;
}

int64_t minus(int64_t a, int64_t b) {
  int64_t difference = 0;
  if (__builtin_sub_overflow(a, b, &difference)) {
    return b < 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  }
  return difference;
}

}  // namespace

int64_t Resources::extendedOf(std::string_view name) const {
  const auto it = extended.find(name);
  return it == extended.end() ? 0 : it->second;
}

Resources& Resources::operator+=(const Resources& other) {
  milliCpu = plus(milliCpu, other.milliCpu);
  memory = plus(memory, other.memory);
  ephemeralStorage = plus(ephemeralStorage, other.ephemeralStorage);
  pods = plus(pods, other.pods);
  for (const auto& [name, amount] : other.extended) {
    auto& slot = extended[name];
    slot = plus(slot, amount);
  }
  return *this;
}

Resources& Resources::operator-=(const Resources& other) {
  milliCpu = minus(milliCpu, other.milliCpu);
  memory = minus(memory, other.memory);
  ephemeralStorage = minus(ephemeralStorage, other.ephemeralStorage);
  pods = minus(pods, other.pods);
  for (const auto& [name, amount] : other.extended) {
    auto& slot = extended[name];
    slot = minus(slot, amount);
    if (slot == 0) extended.erase(name);
  }
  return *this;
}

Status addQuantity(Resources& into, const std::string& name, const std::string& quantity) {
  if (name == "cpu") {
    GRANARY_ASSIGN_OR_RETURN(int64_t milli, parseMilliCpu(quantity));
    into.milliCpu = plus(into.milliCpu, milli);
    return Status::ok();
  }
  auto count = parseCount(quantity);
  if (!count.isOk()) {
    return invalidArgument("resource " + name + ": \"" + quantity + "\" is not a quantity");
  }
  int64_t& slot = name == "memory"              ? into.memory
                  : name == "ephemeral-storage" ? into.ephemeralStorage
                  : name == "pods"              ? into.pods
                                                : into.extended[name];
  slot = plus(slot, *count);
  return Status::ok();
}

std::string shortfall(const Resources& request, const Resources& free) {
  if (request.pods > free.pods) return "Too many pods";
  if (request.milliCpu > free.milliCpu) return "Insufficient cpu";
  if (request.memory > free.memory) return "Insufficient memory";
  if (request.ephemeralStorage > free.ephemeralStorage) return "Insufficient ephemeral-storage";
  for (const auto& [name, amount] : request.extended) {
    if (amount > free.extendedOf(name)) return "Insufficient " + name;
  }
  return "";
}

int64_t copiesThatFit(const Resources& request, const Resources& free) {
  int64_t copies = std::numeric_limits<int32_t>::max();
  const auto limit = [&](int64_t want, int64_t have) {
    if (want > 0) copies = std::min(copies, std::max<int64_t>(0, have) / want);
  };
  limit(request.pods, free.pods);
  limit(request.milliCpu, free.milliCpu);
  limit(request.memory, free.memory);
  limit(request.ephemeralStorage, free.ephemeralStorage);
  for (const auto& [name, amount] : request.extended) limit(amount, free.extendedOf(name));
  return copies;
}

Resources effectiveRequests(const Resources& containersSum, const Resources& largestInit,
                            const Resources& overhead) {
  Resources r = containersSum;
  r.milliCpu = std::max(r.milliCpu, largestInit.milliCpu);
  r.memory = std::max(r.memory, largestInit.memory);
  r.ephemeralStorage = std::max(r.ephemeralStorage, largestInit.ephemeralStorage);
  for (const auto& [name, amount] : largestInit.extended) {
    r.extended[name] = std::max(r.extendedOf(name), amount);
  }
  r += overhead;
  r.pods = 1;
  return r;
}

}  // namespace granary::cluster

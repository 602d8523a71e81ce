// Metrics: each component declares its metrics once — name, type, unit, help, labels —
// and gets back a typed family to record into. Declarations are checked against
// Prometheus conventions (granary_<component>_<what>_<unit>, `_total` on counters, base
// units) so a bad name fails at start-up, not in a dashboard.
//
//   inline const MetricSpec kReadBytes{
//       .name = "granary_cache_read_bytes_total", .type = MetricType::kCounter,
//       .unit = MetricUnit::kBytes, .help = "Bytes served to readers.", .labels = {"source"}};
//   GRANARY_ASSIGN_OR_RETURN(auto readBytes, registry.addCounter(kReadBytes));
//   readBytes.with({"local"}).increment(4096);
//
// Thread-safety: MetricsRegistry and the families and metrics it hands out may be used from
// any thread. Families stay valid for the registry's lifetime.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "common/thread_annotations.h"

namespace prometheus {
class Counter;
class Gauge;
class Histogram;
class Registry;
template <typename T>
class Family;
}  // namespace prometheus

namespace granary {

enum class MetricType { kCounter, kGauge, kHistogram };

// The base unit a metric is measured in; the name must end in its suffix
// (before `_total` for counters). kNone is for plain counts.
enum class MetricUnit {
  kNone,
  kSeconds,
  kBytes,
  kRatio,
  kCelsius,
  kWatts,
  kHertz,
  kBytesPerSecond
};

std::string_view metricUnitSuffix(MetricUnit unit);  // "" for kNone, else e.g. "bytes"

struct MetricSpec {
  std::string name;
  MetricType type = MetricType::kCounter;
  MetricUnit unit = MetricUnit::kNone;
  std::string help;
  std::vector<std::string> labels;  // label names, in the order values are given to with()
  std::vector<double> buckets;      // histograms only; empty means defaultBuckets(unit)
};

// Prometheus' default buckets for seconds; powers of four from 4 KiB to 4 GiB for bytes.
std::vector<double> defaultBuckets(MetricUnit unit);

// Checks a declaration against the naming and labelling rules. Returns InvalidArgument
// naming the rule that was broken and how to fix it.
Status validateMetricSpec(const MetricSpec& spec);

class Counter {
 public:
  explicit Counter(prometheus::Counter& metric) : metric_(&metric) {}
  void increment(double amount = 1);  // amount must be >= 0
  double value() const;

 private:
  prometheus::Counter* metric_;
};

class Gauge {
 public:
  explicit Gauge(prometheus::Gauge& metric) : metric_(&metric) {}
  void set(double value);
  void increment(double amount = 1);
  void decrement(double amount = 1);
  double value() const;

 private:
  prometheus::Gauge* metric_;
};

class Histogram {
 public:
  explicit Histogram(prometheus::Histogram& metric) : metric_(&metric) {}
  void observe(double value);

 private:
  prometheus::Histogram* metric_;
};

// A declared metric and its label names; with() returns the time series for one set of
// label values, creating it on first use. A metric without labels has its one series from its
// declaration on (exported as 0 until changed). Passing the wrong number of values is a bug
// and aborts.
template <typename Metric, typename PrometheusMetric>
class MetricFamily {
 public:
  MetricFamily(prometheus::Family<PrometheusMetric>& family, const MetricSpec& spec)
      : family_(&family), labels_(spec.labels), buckets_(spec.buckets) {}
  Metric with(const std::vector<std::string>& labelValues) const;
  // Removes the series of these label values (one that ended: a pod, a GPU); none is fine.
  void remove(const std::vector<std::string>& labelValues) const;
  const std::vector<std::string>& labelNames() const { return labels_; }

 private:
  prometheus::Family<PrometheusMetric>* family_;
  std::vector<std::string> labels_;
  std::vector<double> buckets_;
};

using CounterFamily = MetricFamily<Counter, prometheus::Counter>;
using GaugeFamily = MetricFamily<Gauge, prometheus::Gauge>;
using HistogramFamily = MetricFamily<Histogram, prometheus::Histogram>;

// Defined in metrics.cc, where prometheus-cpp's headers are.
template <>
Counter CounterFamily::with(const std::vector<std::string>& labelValues) const;
template <>
Gauge GaugeFamily::with(const std::vector<std::string>& labelValues) const;
template <>
Histogram HistogramFamily::with(const std::vector<std::string>& labelValues) const;
template <>
void CounterFamily::remove(const std::vector<std::string>& labelValues) const;
template <>
void GaugeFamily::remove(const std::vector<std::string>& labelValues) const;

class MetricsRegistry {
 public:
  MetricsRegistry();
  ~MetricsRegistry();
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // Declare a metric. InvalidArgument when the spec breaks a rule or its type does not
  // match the call; AlreadyExists when the name was declared before.
  Result<CounterFamily> addCounter(const MetricSpec& spec);
  Result<GaugeFamily> addGauge(const MetricSpec& spec);
  Result<HistogramFamily> addHistogram(const MetricSpec& spec);

  // Every declaration so far, in declaration order (histogram buckets filled in).
  std::vector<MetricSpec> declared() const;

  // The Prometheus text exposition (format 0.0.4) of every series.
  std::string exposition() const;

  // For adapters that serve the registry (MetricsServer).
  std::shared_ptr<prometheus::Registry> prometheusRegistry() const { return registry_; }

 private:
  Status admit(MetricSpec& spec, MetricType expected);

  std::shared_ptr<prometheus::Registry> registry_;
  mutable Mutex mutex_;
  std::vector<MetricSpec> declared_ GRANARY_GUARDED_BY(mutex_);
};

// Declares granary_build_info{component, version} = 1 for a binary (component: its name, e.g.
// "granary-cache-node"), so dashboards tell a running, idle binary from a missing one.
Status declareBuildInfo(MetricsRegistry& registry, const std::string& component);

}  // namespace granary

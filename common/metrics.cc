#include "common/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <map>
#include <regex>

#include "common/check.h"

namespace granary {
namespace {

bool endsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

constexpr MetricUnit kAllUnits[] = {
    MetricUnit::kSeconds, MetricUnit::kBytes, MetricUnit::kRatio,         MetricUnit::kCelsius,
    MetricUnit::kWatts,   MetricUnit::kHertz, MetricUnit::kBytesPerSecond};
// dcgm-exporter's label names, allowed as they are so that its series and granary's join.
constexpr std::string_view kDcgmLabels[] = {"UUID", "modelName", "Hostname"};

std::string_view typeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "metric";
}

std::map<std::string, std::string> labelMap(const std::vector<std::string>& names,
                                            const std::vector<std::string>& values) {
  GRANARY_CHECK(names.size() == values.size(), "metric label values do not match label names");
  std::map<std::string, std::string> labels;
  for (size_t i = 0; i < names.size(); ++i) labels.emplace(names[i], values[i]);
  return labels;
}

}  // namespace

std::string_view metricUnitSuffix(MetricUnit unit) {
  switch (unit) {
    case MetricUnit::kNone:
      return "";
    case MetricUnit::kSeconds:
      return "seconds";
    case MetricUnit::kBytes:
      return "bytes";
    case MetricUnit::kRatio:
      return "ratio";
    case MetricUnit::kCelsius:
      return "celsius";
    case MetricUnit::kWatts:
      return "watts";
    case MetricUnit::kHertz:
      return "hertz";
    case MetricUnit::kBytesPerSecond:
      return "bytes_per_second";
  }
  return "";
}

std::vector<double> defaultBuckets(MetricUnit unit) {
  if (unit == MetricUnit::kBytes) {
    std::vector<double> buckets;
    for (double b = 4096; b <= 4.0 * 1024 * 1024 * 1024; b *= 4) buckets.push_back(b);
    return buckets;
  }
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

Status validateMetricSpec(const MetricSpec& spec) {
  static const std::regex kName("granary_[a-z][a-z0-9]*(_[a-z0-9]+)*");
  static const std::regex kLabel("[a-z][a-z0-9_]*");
  const std::string& name = spec.name;
  auto fail = [&](const std::string& why) {
    return invalidArgument("metric \"" + name + "\": " + why);
  };

  if (!std::regex_match(name, kName)) {
    return fail(
        "name must match granary_<component>_<what>_<unit>: lower-case words joined by "
        "single underscores, starting with \"granary_\"");
  }
  if (spec.help.empty()) return fail("help is empty; say what is measured and in which unit");

  const bool isCounter = spec.type == MetricType::kCounter;
  if (isCounter && !endsWith(name, "_total")) return fail("a counter's name must end in _total");
  if (!isCounter && endsWith(name, "_total")) {
    return fail("only counters end in _total; drop the suffix or declare a counter");
  }

  const std::string_view base =
      isCounter ? std::string_view(name).substr(0, name.size() - 6) : std::string_view(name);
  const std::string_view suffix = metricUnitSuffix(spec.unit);
  if (!suffix.empty() && !endsWith(base, "_" + std::string(suffix))) {
    return fail("unit " + std::string(suffix) + " requires the name to end in _" +
                std::string(suffix) + (isCounter ? "_total" : ""));
  }
  if (suffix.empty()) {
    for (MetricUnit other : kAllUnits) {
      const std::string otherSuffix = "_" + std::string(metricUnitSuffix(other));
      if (endsWith(base, otherSuffix)) {
        return fail("the name ends in " + otherSuffix + " but the unit is none; declare unit " +
                    std::string(metricUnitSuffix(other)));
      }
    }
  }

  for (size_t i = 0; i < spec.labels.size(); ++i) {
    const std::string& label = spec.labels[i];
    const bool dcgm =
        std::find(std::begin(kDcgmLabels), std::end(kDcgmLabels), label) != std::end(kDcgmLabels);
    if (!dcgm && !std::regex_match(label, kLabel)) {
      return fail("label \"" + label +
                  "\" must be lower-case letters, digits and underscores, "
                  "starting with a letter (or one of dcgm-exporter's UUID, modelName, Hostname)");
    }
    if (std::find(spec.labels.begin(), spec.labels.begin() + static_cast<long>(i), label) !=
        spec.labels.begin() + static_cast<long>(i)) {
      return fail("label \"" + label + "\" is listed twice");
    }
    if (spec.type == MetricType::kHistogram && label == "le") {
      return fail("label \"le\" is reserved for histogram buckets");
    }
  }

  if (spec.type != MetricType::kHistogram && !spec.buckets.empty()) {
    return fail("buckets are only for histograms");
  }
  for (size_t i = 1; i < spec.buckets.size(); ++i) {
    if (!(spec.buckets[i] > spec.buckets[i - 1])) {
      return fail("buckets must be strictly increasing");
    }
  }
  return Status::ok();
}

void Counter::increment(double amount) { metric_->Increment(amount); }
double Counter::value() const { return metric_->Value(); }

void Gauge::set(double value) { metric_->Set(value); }
void Gauge::increment(double amount) { metric_->Increment(amount); }
void Gauge::decrement(double amount) { metric_->Decrement(amount); }
double Gauge::value() const { return metric_->Value(); }

void Histogram::observe(double value) { metric_->Observe(value); }

template <>
Counter CounterFamily::with(const std::vector<std::string>& labelValues) const {
  return Counter(family_->Add(labelMap(labels_, labelValues)));
}

template <>
Gauge GaugeFamily::with(const std::vector<std::string>& labelValues) const {
  return Gauge(family_->Add(labelMap(labels_, labelValues)));
}

template <>
void CounterFamily::remove(const std::vector<std::string>& labelValues) const {
  const auto labels = labelMap(labels_, labelValues);
  if (family_->Has(labels)) family_->Remove(&family_->Add(labels));
}

template <>
void GaugeFamily::remove(const std::vector<std::string>& labelValues) const {
  const auto labels = labelMap(labels_, labelValues);
  if (family_->Has(labels)) family_->Remove(&family_->Add(labels));
}

template <>
Histogram HistogramFamily::with(const std::vector<std::string>& labelValues) const {
  return Histogram(family_->Add(labelMap(labels_, labelValues), buckets_));
}

MetricsRegistry::MetricsRegistry() : registry_(std::make_shared<prometheus::Registry>()) {}
MetricsRegistry::~MetricsRegistry() = default;

Status MetricsRegistry::admit(MetricSpec& spec, MetricType expected) {
  if (spec.type != expected) {
    return invalidArgument("metric \"" + spec.name + "\" is declared as a " +
                           std::string(typeName(spec.type)) + " but added as a " +
                           std::string(typeName(expected)));
  }
  GRANARY_RETURN_IF_ERROR(validateMetricSpec(spec));
  if (spec.type == MetricType::kHistogram && spec.buckets.empty()) {
    spec.buckets = defaultBuckets(spec.unit);
  }
  MutexLock lock(mutex_);
  for (const auto& existing : declared_) {
    if (existing.name == spec.name) {
      return alreadyExists("metric \"" + spec.name + "\" is declared twice; declare it once " +
                           "per process and share the family");
    }
  }
  declared_.push_back(spec);
  return Status::ok();
}

namespace {

// A metric without labels has exactly one series: made at declaration, it is exported from the
// start (0 until changed), so that a scrape tells an idle component from a missing one.
template <typename Family>
Family withSeriesOfNoLabels(Family family) {
  if (family.labelNames().empty()) (void)family.with({});
  return family;
}

}  // namespace

Result<CounterFamily> MetricsRegistry::addCounter(const MetricSpec& spec) {
  MetricSpec s = spec;
  GRANARY_RETURN_IF_ERROR(admit(s, MetricType::kCounter));
  auto& family = prometheus::BuildCounter().Name(s.name).Help(s.help).Register(*registry_);
  return withSeriesOfNoLabels(CounterFamily(family, s));
}

Result<GaugeFamily> MetricsRegistry::addGauge(const MetricSpec& spec) {
  MetricSpec s = spec;
  GRANARY_RETURN_IF_ERROR(admit(s, MetricType::kGauge));
  auto& family = prometheus::BuildGauge().Name(s.name).Help(s.help).Register(*registry_);
  return withSeriesOfNoLabels(GaugeFamily(family, s));
}

Result<HistogramFamily> MetricsRegistry::addHistogram(const MetricSpec& spec) {
  MetricSpec s = spec;
  GRANARY_RETURN_IF_ERROR(admit(s, MetricType::kHistogram));
  auto& family = prometheus::BuildHistogram().Name(s.name).Help(s.help).Register(*registry_);
  return withSeriesOfNoLabels(HistogramFamily(family, s));
}

std::vector<MetricSpec> MetricsRegistry::declared() const {
  MutexLock lock(mutex_);
  return declared_;
}

std::string MetricsRegistry::exposition() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

Status declareBuildInfo(MetricsRegistry& registry, const std::string& component) {
  GRANARY_ASSIGN_OR_RETURN(
      auto info, registry.addGauge({.name = "granary_build_info",
                                    .type = MetricType::kGauge,
                                    .help = "1, labelled with the binary and its version.",
                                    .labels = {"component", "version"}}));
  info.with({component, GRANARY_VERSION}).set(1);
  return Status::ok();
}

}  // namespace granary

// common/ on its hot and start-up paths, each next to its baseline:
//   - parsing a Dataset manifest: yaml-cpp alone (baseline) vs config::parse (yaml-cpp plus
//     the conversion to config::Node) vs parse + full decode and validation;
//   - recording a counter: prometheus-cpp directly (baseline) vs a granary Counter handle vs
//     looking the series up by label values on every call (what handles avoid).
#include <benchmark/benchmark.h>
#include <prometheus/counter.h>
#include <prometheus/registry.h>
#include <yaml-cpp/yaml.h>

#include "common/api/manifest.h"
#include "common/metrics.h"

namespace {

constexpr const char* kManifest = R"(
apiVersion: granary.io/v1alpha1
kind: Dataset
metadata: {name: imagenet, namespace: ml, labels: {team: vision}}
spec:
  source:
    uri: s3://datasets/imagenet/train/
    region: us-east-1
    secretRef: {name: imagenet-s3}
  cache:
    replicas: 2
    capacityPerNode: 800Gi
    nodeSelector: {nvidia.com/gpu.present: "true"}
    tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
    policy: Pin
    warm: OnCreate
    bandwidthLimit: 1Gi
)";

void BM_Baseline_YamlCppLoad(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(YAML::Load(kManifest));
}
BENCHMARK(BM_Baseline_YamlCppLoad);

void BM_ConfigParse(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(granary::config::parse(kManifest, "bench.yaml"));
}
BENCHMARK(BM_ConfigParse);

void BM_ConfigParseAndDecodeDataset(benchmark::State& state) {
  for (auto _ : state) {
    auto node = granary::config::parse(kManifest, "bench.yaml");
    benchmark::DoNotOptimize(granary::api::decodeObject(*node));
  }
}
BENCHMARK(BM_ConfigParseAndDecodeDataset);

void BM_Baseline_PrometheusCounterIncrement(benchmark::State& state) {
  prometheus::Registry registry;
  auto& counter = prometheus::BuildCounter()
                      .Name("granary_bench_bytes_total")
                      .Help("h")
                      .Register(registry)
                      .Add({{"source", "local"}});
  for (auto _ : state) counter.Increment(4096);
}
BENCHMARK(BM_Baseline_PrometheusCounterIncrement);

granary::MetricSpec benchSpec() {
  return {.name = "granary_bench_bytes_total",
          .type = granary::MetricType::kCounter,
          .unit = granary::MetricUnit::kBytes,
          .help = "h",
          .labels = {"source"}};
}

void BM_CounterHandleIncrement(benchmark::State& state) {
  granary::MetricsRegistry registry;
  auto family = registry.addCounter(benchSpec());
  granary::Counter counter = family->with({"local"});
  for (auto _ : state) counter.increment(4096);
}
BENCHMARK(BM_CounterHandleIncrement);

void BM_CounterLookupEveryIncrement(benchmark::State& state) {
  granary::MetricsRegistry registry;
  auto family = registry.addCounter(benchSpec());
  for (auto _ : state) family->with({"local"}).increment(4096);
}
BENCHMARK(BM_CounterLookupEveryIncrement);

}  // namespace

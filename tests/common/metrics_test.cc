#include "common/metrics.h"

#include <gtest/gtest.h>

#include <thread>

namespace granary {
namespace {

MetricSpec counterSpec() {
  return {.name = "granary_cache_read_bytes_total",
          .type = MetricType::kCounter,
          .unit = MetricUnit::kBytes,
          .help = "Bytes served to readers, by source.",
          .labels = {"source"}};
}

std::string reasonFor(MetricSpec spec) {
  Status status = validateMetricSpec(spec);
  EXPECT_FALSE(status.isOk()) << spec.name;
  return status.message();
}

TEST(MetricSpec, AcceptsConventionalNames) {
  EXPECT_TRUE(validateMetricSpec(counterSpec()).isOk());
  EXPECT_TRUE(validateMetricSpec({.name = "granary_warm_queue_depth",
                                  .type = MetricType::kGauge,
                                  .help = "Chunks waiting to be warmed."})
                  .isOk());
  EXPECT_TRUE(validateMetricSpec({.name = "granary_dataset_read_wait_seconds",
                                  .type = MetricType::kHistogram,
                                  .unit = MetricUnit::kSeconds,
                                  .help = "Time a read blocked on a miss.",
                                  .labels = {"dataset", "pod"}})
                  .isOk());
}

TEST(MetricSpec, RejectsEachBrokenRuleWithItsFix) {
  MetricSpec spec = counterSpec();
  spec.name = "cache_reads_total";
  EXPECT_NE(reasonFor(spec).find("starting with \"granary_\""), std::string::npos);
  spec.name = "granary_Cache_total";
  EXPECT_NE(reasonFor(spec).find("lower-case"), std::string::npos);
  spec.name = "granary_cache__bytes_total";
  EXPECT_NE(reasonFor(spec).find("single underscores"), std::string::npos);

  spec = counterSpec();
  spec.name = "granary_cache_read_bytes";
  EXPECT_NE(reasonFor(spec).find("must end in _total"), std::string::npos);

  spec = counterSpec();
  spec.type = MetricType::kGauge;
  EXPECT_NE(reasonFor(spec).find("only counters end in _total"), std::string::npos);

  spec = counterSpec();
  spec.name = "granary_cache_reads_total";
  EXPECT_NE(reasonFor(spec).find("end in _bytes_total"), std::string::npos);

  spec = counterSpec();
  spec.unit = MetricUnit::kNone;
  EXPECT_NE(reasonFor(spec).find("declare unit bytes"), std::string::npos);

  spec = counterSpec();
  spec.help = "";
  EXPECT_NE(reasonFor(spec).find("help is empty"), std::string::npos);

  spec = counterSpec();
  spec.labels = {"source", "source"};
  EXPECT_NE(reasonFor(spec).find("listed twice"), std::string::npos);
  spec.labels = {"Source"};
  EXPECT_NE(reasonFor(spec).find("label \"Source\""), std::string::npos);
  spec.labels = {"__name"};
  EXPECT_NE(reasonFor(spec).find("label \"__name\""), std::string::npos);

  spec = counterSpec();
  spec.buckets = {1, 2};
  EXPECT_NE(reasonFor(spec).find("only for histograms"), std::string::npos);

  MetricSpec histogram{.name = "granary_x_seconds",
                       .type = MetricType::kHistogram,
                       .unit = MetricUnit::kSeconds,
                       .help = "h",
                       .labels = {"le"}};
  EXPECT_NE(reasonFor(histogram).find("reserved"), std::string::npos);
  histogram.labels = {};
  histogram.buckets = {1, 1};
  EXPECT_NE(reasonFor(histogram).find("strictly increasing"), std::string::npos);
}

TEST(MetricsRegistry, RecordsAndExposesSeries) {
  MetricsRegistry registry;
  auto reads = registry.addCounter(counterSpec());
  ASSERT_TRUE(reads.isOk()) << reads.status();
  reads->with({"local"}).increment(4096);
  reads->with({"local"}).increment(4096);
  reads->with({"origin"}).increment(100);
  EXPECT_DOUBLE_EQ(reads->with({"local"}).value(), 8192);

  auto depth = registry.addGauge(
      {.name = "granary_warm_queue_depth", .type = MetricType::kGauge, .help = "Queued chunks."});
  ASSERT_TRUE(depth.isOk());
  depth->with({}).set(7);
  depth->with({}).decrement(2);

  auto wait = registry.addHistogram({.name = "granary_read_wait_seconds",
                                     .type = MetricType::kHistogram,
                                     .unit = MetricUnit::kSeconds,
                                     .help = "Blocked reads.",
                                     .buckets = {0.1, 1}});
  ASSERT_TRUE(wait.isOk());
  wait->with({}).observe(0.5);

  const std::string text = registry.exposition();
  EXPECT_NE(text.find("# HELP granary_cache_read_bytes_total Bytes served to readers, by source."),
            std::string::npos);
  EXPECT_NE(text.find("# TYPE granary_cache_read_bytes_total counter"), std::string::npos);
  EXPECT_NE(text.find("granary_cache_read_bytes_total{source=\"local\"} 8192"), std::string::npos);
  EXPECT_NE(text.find("granary_cache_read_bytes_total{source=\"origin\"} 100"), std::string::npos);
  EXPECT_NE(text.find("granary_warm_queue_depth 5"), std::string::npos);
  EXPECT_NE(text.find("granary_read_wait_seconds_bucket{le=\"0.1\"} 0"), std::string::npos);
  EXPECT_NE(text.find("granary_read_wait_seconds_bucket{le=\"1\"} 1"), std::string::npos);
  EXPECT_NE(text.find("granary_read_wait_seconds_count 1"), std::string::npos);
}

TEST(MetricsRegistry, UnlabelledMetricsAreExportedFromTheirDeclaration) {
  MetricsRegistry registry;
  ASSERT_TRUE(registry
                  .addGauge({.name = "granary_cache_capacity_bytes",
                             .type = MetricType::kGauge,
                             .unit = MetricUnit::kBytes,
                             .help = "Cache space."})
                  .isOk());
  ASSERT_TRUE(registry.addCounter(counterSpec()).isOk());  // labelled: no series until used
  ASSERT_TRUE(registry
                  .addHistogram({.name = "granary_read_wait_seconds",
                                 .type = MetricType::kHistogram,
                                 .unit = MetricUnit::kSeconds,
                                 .help = "Blocked reads.",
                                 .buckets = {1}})
                  .isOk());
  const std::string text = registry.exposition();
  EXPECT_NE(text.find("\ngranary_cache_capacity_bytes 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("granary_read_wait_seconds_count 0"), std::string::npos) << text;
  EXPECT_EQ(text.find("granary_cache_read_bytes_total{"), std::string::npos) << text;
}

TEST(MetricsRegistry, DeclaresEachNameOnce) {
  MetricsRegistry registry;
  ASSERT_TRUE(registry.addCounter(counterSpec()).isOk());
  auto again = registry.addCounter(counterSpec());
  EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists);
  ASSERT_EQ(registry.declared().size(), 1u);
  EXPECT_EQ(registry.declared()[0].name, "granary_cache_read_bytes_total");
}

TEST(MetricsRegistry, RejectsTypeMismatchAndInvalidSpecsWithoutRegistering) {
  MetricsRegistry registry;
  auto mismatch = registry.addGauge(counterSpec());
  EXPECT_EQ(mismatch.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mismatch.status().message().find("declared as a counter but added as a gauge"),
            std::string::npos);
  MetricSpec bad = counterSpec();
  bad.name = "bad";
  EXPECT_FALSE(registry.addCounter(bad).isOk());
  EXPECT_TRUE(registry.declared().empty());
  EXPECT_EQ(registry.exposition(), "");
}

TEST(MetricsRegistry, HistogramsGetDefaultBucketsForTheirUnit) {
  MetricsRegistry registry;
  ASSERT_TRUE(registry
                  .addHistogram({.name = "granary_chunk_size_bytes",
                                 .type = MetricType::kHistogram,
                                 .unit = MetricUnit::kBytes,
                                 .help = "Chunk sizes."})
                  .isOk());
  const auto declared = registry.declared();
  ASSERT_EQ(declared.size(), 1u);
  EXPECT_EQ(declared[0].buckets, defaultBuckets(MetricUnit::kBytes));
  EXPECT_EQ(declared[0].buckets.front(), 4096);
}

TEST(MetricsRegistry, ConcurrentIncrementsAreNotLost) {
  MetricsRegistry registry;
  auto reads = registry.addCounter(counterSpec());
  ASSERT_TRUE(reads.isOk());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) reads->with({"peer"}).increment();
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_DOUBLE_EQ(reads->with({"peer"}).value(), 40000);
}

TEST(MetricsRegistryDeathTest, WrongLabelCountAborts) {
  MetricsRegistry registry;
  auto reads = registry.addCounter(counterSpec());
  ASSERT_TRUE(reads.isOk());
  EXPECT_DEATH(reads->with({"local", "extra"}), "label values do not match label names");
}

}  // namespace
}  // namespace granary

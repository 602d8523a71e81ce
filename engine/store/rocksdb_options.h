// RocksDB settings shared by the manifest and chunk stores. Point lookups dominate (a stat, a
// chunk record per read), so every table has bloom filters. What the stores hold in memory is
// bounded whatever the number of files: one block cache for every store of the process keeps
// data, index and filter blocks alike (index and filters are partitioned, only their top level
// pinned), memtables are small, and passes over a whole store read around the cache. Outside
// the cache, index and filter blocks would grow with every table: some 45 MiB at 10 million
// files, 450 at 100 million.
#pragma once

#include <rocksdb/cache.h>
#include <rocksdb/env.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>

#include <cstdarg>
#include <cstdio>
#include <memory>

#include "common/log.h"

namespace granary::cache {

// RocksDB's own diagnostics go to the node's log (warnings and errors only), never to a LOG
// file beside the store: that file grows on the very disk the cache fills, and a failed write
// to it aborts the process.
class StoreLogger final : public rocksdb::Logger {
 public:
  StoreLogger() : rocksdb::Logger(rocksdb::InfoLogLevel::WARN_LEVEL) {}
  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list arguments) override {
    char text[1024];
    std::vsnprintf(text, sizeof text, format, arguments);
    granary::Logger("rocksdb").warn(text);
  }
};

// The block cache of every store in the process.
inline const std::shared_ptr<rocksdb::Cache>& sharedBlockCache() {
  static const std::shared_ptr<rocksdb::Cache> cache = rocksdb::NewLRUCache(32 << 20);
  return cache;
}

inline rocksdb::Options storeOptions() {
  rocksdb::Options options;
  options.create_if_missing = true;
  options.info_log = std::make_shared<StoreLogger>();
  options.OptimizeLevelStyleCompaction(64 << 20);
  // Up to 3 memtables of 8 MiB (the level-style defaults keep up to 6 of 16 MiB).
  options.write_buffer_size = 8 << 20;
  options.max_write_buffer_number = 3;
  options.min_write_buffer_number_to_merge = 1;
  // A lookup of a key the memtables lack (a chunk not cached here, read from a peer) asks their
  // bloom filter, not their skip lists: 2 % of each memtable's size.
  options.memtable_whole_key_filtering = true;
  options.memtable_prefix_bloom_size_ratio = 0.02;
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = sharedBlockCache();
  table.cache_index_and_filter_blocks = true;
  table.cache_index_and_filter_blocks_with_high_priority = true;
  table.pin_top_level_index_and_filter = true;
  table.index_type = rocksdb::BlockBasedTableOptions::kTwoLevelIndexSearch;
  table.partition_filters = true;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  return options;
}

// For a pass over a whole store (a warm scan, a count, a check at start): its blocks would only
// push the lookups' working set out of the cache.
inline rocksdb::ReadOptions scanOptions() {
  rocksdb::ReadOptions options;
  options.fill_cache = false;
  return options;
}

}  // namespace granary::cache

// RocksDB settings shared by the manifest and chunk stores: point lookups dominate (a stat, a
// chunk record per read), so each store gets a bloom filter and its own block cache large
// enough to keep a million-entry store's blocks in memory once read.
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

inline rocksdb::Options storeOptions(size_t blockCacheBytes = 64 << 20) {
  rocksdb::Options options;
  options.create_if_missing = true;
  options.info_log = std::make_shared<StoreLogger>();
  options.OptimizeLevelStyleCompaction(64 << 20);
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = rocksdb::NewLRUCache(blockCacheBytes);
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  return options;
}

}  // namespace granary::cache

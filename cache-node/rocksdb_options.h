// RocksDB settings shared by the manifest and chunk stores: point lookups dominate (a stat, a
// chunk record per read), so each store gets a bloom filter and its own block cache large
// enough to keep a million-entry store's blocks in memory once read.
#pragma once

#include <rocksdb/cache.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>

namespace granary::cache {

inline rocksdb::Options storeOptions(size_t blockCacheBytes = 64 << 20) {
  rocksdb::Options options;
  options.create_if_missing = true;
  options.OptimizeLevelStyleCompaction(64 << 20);
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = rocksdb::NewLRUCache(blockCacheBytes);
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  return options;
}

}  // namespace granary::cache

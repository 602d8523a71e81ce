#include "engine/store/store_guard.h"

#include <rocksdb/db.h>
#include <rocksdb/status.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "common/log.h"

namespace granary::cache {

Status StoreGuard::open(const rocksdb::Options& options, rocksdb::DB** db) {
  rocksdb::Status opened = rocksdb::DB::Open(options, directory_.string(), db);
  if (opened.IsNoSpace() || (opened.IsIOError() && !admit(0).isOk())) {
    Logger("cache").warn("the disk is full: the store is opened read-only until a restart",
                         {{"store", what_}, {"error", opened.ToString()}});
    opened = rocksdb::DB::OpenForReadOnly(options, directory_.string(), db);
    readOnly_ = opened.ok();
  }
  if (opened.ok()) return Status::ok();
  return unavailable(what_ + " " + directory_.string() + ": " + opened.ToString());
}

namespace {

std::vector<rocksdb::ColumnFamilyDescriptor> descriptorsOf(const rocksdb::Options& options,
                                                           const std::vector<std::string>& names) {
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  descriptors.emplace_back(rocksdb::kDefaultColumnFamilyName, options);
  for (const std::string& name : names) descriptors.emplace_back(name, options);
  return descriptors;
}

}  // namespace

Status StoreGuard::open(const rocksdb::Options& options, const std::vector<std::string>& families,
                        rocksdb::DB** db, std::vector<rocksdb::ColumnFamilyHandle*>& handles) {
  rocksdb::Options creating = options;
  creating.create_missing_column_families = true;
  const std::string path = directory_.string();
  rocksdb::Status opened =
      rocksdb::DB::Open(creating, path, descriptorsOf(options, families), &handles, db);
  if (opened.IsNoSpace() || (opened.IsIOError() && !admit(0).isOk())) {
    Logger("cache").warn("the disk is full: the store is opened read-only until a restart",
                         {{"store", what_}, {"error", opened.ToString()}});
    std::vector<std::string> existing;
    rocksdb::DB::ListColumnFamilies(options, path, &existing);
    std::vector<std::string> present;
    for (const std::string& name : families) {
      if (std::find(existing.begin(), existing.end(), name) != existing.end())
        present.push_back(name);
    }
    opened =
        rocksdb::DB::OpenForReadOnly(options, path, descriptorsOf(options, present), &handles, db);
    readOnly_ = opened.ok();
    if (opened.ok()) {  // each family in its place, the default one's handle where it is missing
      std::vector<rocksdb::ColumnFamilyHandle*> placed{handles.front()};
      for (const std::string& name : families) {
        const auto at = std::find(present.begin(), present.end(), name);
        placed.push_back(at == present.end() ? handles.front()
                                             : handles[1 + (at - present.begin())]);
      }
      handles = std::move(placed);
    }
  }
  if (opened.ok()) return Status::ok();
  return unavailable(what_ + " " + path + ": " + opened.ToString());
}

void StoreGuard::abandon(std::unique_ptr<rocksdb::DB> db) {
  // Never destroyed: destroying it would close the databases it holds.
  static auto* const abandoned = new std::vector<std::unique_ptr<rocksdb::DB>>();
  static std::mutex mutex;
  const std::lock_guard lock(mutex);
  abandoned->push_back(std::move(db));
}

Status StoreGuard::admit(int64_t bytes) const {
  if (readOnly_) {
    return {StatusCode::kResourceExhausted,
            what_ +
                ": the disk was full when the node started, so the store is read-only; "
                "restart the node once there is room"};
  }
  struct statvfs fs {};
  if (::statvfs(directory_.c_str(), &fs) != 0) return Status::ok();  // the write will say
  const auto free = static_cast<int64_t>(fs.f_bavail * fs.f_frsize);
  if (free - bytes >= kMarginBytes) return Status::ok();
  return {StatusCode::kResourceExhausted, what_ + ": disk full: " + std::to_string(free) +
                                              " bytes free on the file system of " +
                                              directory_.string() + ", which keeps " +
                                              std::to_string(kMarginBytes) + " free for the index"};
}

Status StoreGuard::check(const rocksdb::Status& written) {
  if (written.ok()) return Status::ok();
  if (written.IsNotFound()) return notFound(what_ + ": not found");
  if (written.IsIOError()) failed_ = true;
  if (written.IsNoSpace() || written.subcode() == rocksdb::Status::kSpaceLimit)
    return {StatusCode::kResourceExhausted, what_ + ": disk full: " + written.ToString()};
  return unavailable(what_ + ": " + written.ToString());
}

}  // namespace granary::cache

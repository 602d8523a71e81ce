#include "engine/store/manifest_store.h"

#include <rocksdb/db.h>
#include <rocksdb/slice_transform.h>
#include <rocksdb/write_batch.h>
#include <xxhash.h>

#include <cstring>
#include <optional>
#include <set>

#include "engine/store/rocksdb_options.h"

namespace granary::cache {
namespace {

// Every key of a generation starts with its kind and the generation: kind NUL generation NUL.
std::string generationPrefix(char kind, std::string_view generation) {
  std::string k(1, kind);
  k += '\0';
  k.append(generation);
  k += '\0';
  return k;
}

// Entries: "m" NUL generation NUL parent-directory NUL name. NUL sorts first, so a directory's
// children are contiguous and in name order.
std::string key(std::string_view generation, std::string_view parent, std::string_view name) {
  std::string k = generationPrefix('m', generation);
  k.append(parent);
  k += '\0';
  k.append(name);
  return k;
}

void appendBigEndian(std::string& out, uint64_t value) {
  for (int shift = 56; shift >= 0; shift -= 8) out += static_cast<char>((value >> shift) & 0xff);
}

// The inode index of directories (and of every entry in stores written before files were
// counted): "i" NUL generation NUL inode (8 bytes, big-endian) → path.
std::string inodeKey(std::string_view generation, uint64_t inode) {
  std::string k = generationPrefix('i', generation);
  appendBigEndian(k, inode);
  return k;
}

// The inode index of files, kInodesPerGroup inodes to a key, so that a listing writes one key
// per file, not two: "g" NUL generation NUL group (8 bytes, big-endian) → the group's first
// slot held (1 byte), then each held slot's path (4-byte length, then the path), slot after slot.
// The counter never goes back, so a later put only appends to a group.
constexpr uint64_t kInodesPerGroup = 64;

std::string groupKey(std::string_view generation, uint64_t inode) {
  std::string k = generationPrefix('g', generation);
  appendBigEndian(k, inode / kInodesPerGroup);
  return k;
}

// One record of a generation: kind NUL generation. Kinds: "n" the inode counter (the next file
// inode), "c" the completion mark (files, bytes), "p" the listing's progress (source, files,
// bytes, after).
std::string recordKey(char kind, std::string_view generation) {
  std::string k(1, kind);
  k += '\0';
  k.append(generation);
  return k;
}
std::string counterKey(std::string_view generation) { return recordKey('n', generation); }
std::string completionKey(std::string_view generation) { return recordKey('c', generation); }
std::string progressKey(std::string_view generation) { return recordKey('p', generation); }

std::pair<std::string_view, std::string_view> splitPath(std::string_view path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) return {"", path};
  return {path.substr(0, slash), path.substr(slash + 1)};
}

template <typename T>
void append(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

template <typename T>
T read(std::string_view& in) {
  T value{};
  std::memcpy(&value, in.data(), sizeof(T));
  in.remove_prefix(sizeof(T));
  return value;
}

// Value: size, mtime, inode, mode, directory flag, then the etag (fixed layout, host byte order:
// the store never leaves the node).
constexpr size_t kFixed = 8 + 8 + 8 + 4 + 1;

std::string encode(const ManifestEntry& e, uint64_t inode) {
  std::string v;
  v.reserve(kFixed + e.etag.size());
  append<int64_t>(v, e.size);
  append<int64_t>(v, e.modifiedUnixNanos);
  append<uint64_t>(v, inode);
  append<uint32_t>(v, e.mode);
  v += e.directory ? '\1' : '\0';
  v += e.etag;
  return v;
}

Result<ManifestEntry> decode(std::string path, std::string_view value) {
  if (value.size() < kFixed) return corruption("manifest entry for \"" + path + "\" is truncated");
  ManifestEntry e;
  e.path = std::move(path);
  e.size = read<int64_t>(value);
  e.modifiedUnixNanos = read<int64_t>(value);
  e.inode = read<uint64_t>(value);
  e.mode = read<uint32_t>(value);
  e.directory = read<char>(value) != 0;
  e.etag = std::string(value);
  return e;
}

// Progress as stored: a mark no source index takes, the source, files, bytes, the number of
// ranges, then each range's `after` and `through` (a 4-byte length, then the path). Written before
// sources were split, a record held source, files, bytes, then the last path stored: that is one
// range, to the end.
constexpr uint32_t kRangesMark = 0xffffffff;

void appendPath(std::string& out, std::string_view path) {
  append<uint32_t>(out, static_cast<uint32_t>(path.size()));
  out.append(path);
}

std::optional<std::string> readPath(std::string_view& in) {
  if (in.size() < 4) return std::nullopt;
  const auto size = read<uint32_t>(in);
  if (in.size() < size) return std::nullopt;
  std::string path(in.substr(0, size));
  in.remove_prefix(size);
  return path;
}

std::string encodeProgress(const ListingProgress& progress) {
  std::string v;
  append<uint32_t>(v, kRangesMark);
  append<uint32_t>(v, progress.source);
  append<int64_t>(v, progress.totals.files);
  append<int64_t>(v, progress.totals.bytes);
  append<uint32_t>(v, static_cast<uint32_t>(progress.ranges.size()));
  for (const KeyRange& range : progress.ranges) {
    appendPath(v, range.after);
    appendPath(v, range.through);
  }
  return v;
}

// nullopt when `value` is truncated.
std::optional<ListingProgress> decodeProgress(std::string_view value) {
  if (value.size() < 4 + 8 + 8) return std::nullopt;
  std::string_view mark = value;
  const bool ranges = read<uint32_t>(mark) == kRangesMark;
  if (ranges) value.remove_prefix(4);
  if (value.size() < 4 + 8 + 8) return std::nullopt;
  ListingProgress progress;
  progress.source = read<uint32_t>(value);
  progress.totals.files = read<int64_t>(value);
  progress.totals.bytes = read<int64_t>(value);
  if (!ranges) {
    progress.ranges.push_back({.after = std::string(value), .through = ""});
    return progress;
  }
  if (value.size() < 4) return std::nullopt;
  for (auto count = read<uint32_t>(value); count > 0; --count) {
    auto after = readPath(value);
    auto through = after ? readPath(value) : std::nullopt;
    if (!through) return std::nullopt;
    progress.ranges.push_back({.after = std::move(*after), .through = std::move(*through)});
  }
  return progress;
}

// A key's kind and generation (up to its second NUL): a listing writes each such range in
// ascending order (inodes from the counter, entries in the origin's key order), so the memtable
// inserts each key beside the one before it instead of searching from its top.
class GenerationPrefix final : public rocksdb::SliceTransform {
 public:
  const char* Name() const override { return "granary.GenerationPrefix"; }
  rocksdb::Slice Transform(const rocksdb::Slice& key) const override {
    return rocksdb::Slice(key.data(), secondNul(key) + 1);
  }
  bool InDomain(const rocksdb::Slice& key) const override {
    return secondNul(key) != std::string_view::npos;
  }

 private:
  static size_t secondNul(const rocksdb::Slice& key) {
    const std::string_view k = key.ToStringView();
    const size_t first = k.find('\0');
    return first == std::string_view::npos ? first : k.find('\0', first + 1);
  }
};

void appendToGroup(std::string& group, std::string_view path) {
  append<uint32_t>(group, static_cast<uint32_t>(path.size()));
  group.append(path);
}

// The path of `inode` in its group's value; nullopt when the group does not hold it.
std::optional<std::string_view> pathInGroup(std::string_view group, uint64_t inode) {
  if (group.empty()) return std::nullopt;
  const uint64_t first = static_cast<uint8_t>(group.front()), slot = inode % kInodesPerGroup;
  group.remove_prefix(1);
  if (slot < first) return std::nullopt;
  for (uint64_t at = first;; ++at) {
    if (group.size() < sizeof(uint32_t)) return std::nullopt;
    const uint32_t length = read<uint32_t>(group);
    if (group.size() < length) return std::nullopt;
    if (at == slot) return group.substr(0, length);
    group.remove_prefix(length);
  }
}

Status fromRocks(const rocksdb::Status& s, std::string_view what) {
  if (s.ok()) return Status::ok();
  if (s.IsNotFound()) return notFound(std::string(what) + ": not found");
  if (s.IsCorruption()) return corruption(std::string(what) + ": " + s.ToString());
  return unavailable(std::string(what) + ": " + s.ToString());
}

constexpr const char* kFilesFamily = "files";
constexpr const char* kInodesFamily = "inodes";

}  // namespace

// Two iterators, of the files family and of the default one, as one in key order from `from` up
// to the end of `prefix`; on a key in both (the same family twice, in a store opened read-only
// without its families), the entry once. Around the block cache: each scan is of a whole
// directory or generation, read once.
class ManifestStore::EntryScan {
 public:
  EntryScan(rocksdb::DB& db, rocksdb::ColumnFamilyHandle* files, rocksdb::ColumnFamilyHandle* rest,
            const std::string& from, const std::string& prefix)
      : end_(prefix.substr(0, prefix.size() - 1) + static_cast<char>(prefix.back() + 1)),
        bound_(end_) {
    rocksdb::ReadOptions options = scanOptions();
    options.iterate_upper_bound = &bound_;  // tables past the prefix are not read
    files_.reset(db.NewIterator(options, files));
    rest_.reset(db.NewIterator(options, rest));
    files_->Seek(from);
    rest_->Seek(from);
  }
  EntryScan(const EntryScan&) = delete;
  EntryScan& operator=(const EntryScan&) = delete;

  bool Valid() const { return files_->Valid() || rest_->Valid(); }
  rocksdb::Slice key() const { return current()->key(); }
  rocksdb::Slice value() const { return current()->value(); }
  void Next() {
    if (files_->Valid() && rest_->Valid() && files_->key() == rest_->key()) rest_->Next();
    current()->Next();
  }
  rocksdb::Status status() const {
    return files_->status().ok() ? rest_->status() : files_->status();
  }

 private:
  rocksdb::Iterator* current() const {
    if (!rest_->Valid()) return files_.get();
    if (!files_->Valid()) return rest_.get();
    return rest_->key().compare(files_->key()) < 0 ? rest_.get() : files_.get();
  }
  const std::string end_;  // the first key past the prefix
  const rocksdb::Slice bound_;
  std::unique_ptr<rocksdb::Iterator> files_, rest_;
};

ManifestStore::ManifestStore(std::unique_ptr<rocksdb::DB> db,
                             std::vector<rocksdb::ColumnFamilyHandle*> handles,
                             std::unique_ptr<StoreGuard> guard)
    : db_(std::move(db)),
      handles_(std::move(handles)),
      files_(handles_.at(1)),
      inodes_(handles_.at(2)),
      guard_(std::move(guard)) {}

ManifestStore::~ManifestStore() {
  if (guard_->keepOpen()) {  // closing would abort
    StoreGuard::abandon(std::move(db_));
    return;
  }
  for (auto* handle : std::set<rocksdb::ColumnFamilyHandle*>(handles_.begin(), handles_.end()))
    db_->DestroyColumnFamilyHandle(handle);
}

std::unique_ptr<ManifestStore::EntryScan> ManifestStore::scan(const std::string& from,
                                                              const std::string& prefix) const {
  return std::make_unique<EntryScan>(*db_, files_, handles_.front(), from, prefix);
}

Result<ManifestEntry> ManifestStore::entryAt(const std::string& key, std::string path) const {
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), files_, key, &value);
  if (s.IsNotFound()) s = db_->Get(rocksdb::ReadOptions(), key, &value);
  if (s.IsNotFound()) return notFound("\"" + path + "\" is not in the dataset");
  GRANARY_RETURN_IF_ERROR(fromRocks(s, "manifest read"));
  return decode(std::move(path), value);
}

Status ManifestStore::write(int64_t bytes, const std::function<rocksdb::Status()>& write) {
  GRANARY_RETURN_IF_ERROR(guard_->admit(bytes));
  return guard_->check(write());
}

Result<std::unique_ptr<ManifestStore>> ManifestStore::open(const std::filesystem::path& directory) {
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error) return unavailable("manifest store " + directory.string() + ": " + error.message());
  rocksdb::Options options = storeOptions();
  // Hints are kept only where one writer fills the memtable at a time (puts take turns).
  options.memtable_insert_with_hint_prefix_extractor = std::make_shared<GenerationPrefix>();
  options.allow_concurrent_memtable_write = false;
  // The families' memtables together hold what one family's did, and the log that the default
  // family's few records keep alive is flushed away at 64 MiB (a restart replays it).
  options.db_write_buffer_size = options.write_buffer_size * options.max_write_buffer_number;
  options.max_total_wal_size = 64 << 20;
  // One compression at every level, so that a table moves down unchanged: with the level-style
  // defaults (none at levels 0 and 1, then compressed), every table of a listing was rewritten
  // once more into level 2.
  options.compression_per_level.clear();
  options.compression = rocksdb::kLZ4Compression;
  auto guard = std::make_unique<StoreGuard>(directory, "manifest store");
  rocksdb::DB* raw = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  GRANARY_RETURN_IF_ERROR(guard->open(options, {kFilesFamily, kInodesFamily}, &raw, handles));
  return std::unique_ptr<ManifestStore>(
      new ManifestStore(std::unique_ptr<rocksdb::DB>(raw), std::move(handles), std::move(guard)));
}

Result<uint64_t> ManifestStore::nextInode(std::string_view generation) {
  if (const auto it = nextInodes_.find(generation); it != nextInodes_.end()) return it->second;
  std::string value;
  const rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), counterKey(generation), &value);
  uint64_t next = kRootInode + 1;
  if (s.ok() && value.size() == sizeof next) {
    std::string_view in = value;
    next = read<uint64_t>(in);
  } else if (s.ok()) {
    return corruption("manifest inode counter of " + std::string(generation));
  } else if (!s.IsNotFound()) {
    return fromRocks(s, "manifest inode counter");
  }
  nextInodes_.emplace(std::string(generation), next);
  return next;
}

Result<uint64_t> ManifestStore::directoryInode(std::string_view generation, std::string_view path,
                                               std::set<uint64_t>& taken) const {
  for (uint64_t seed = 0;; ++seed) {
    const uint64_t inode = XXH3_64bits_withSeed(path.data(), path.size(), seed) | kDirectoryInodes;
    if (taken.contains(inode)) continue;
    std::string holder;
    const rocksdb::Status s =
        db_->Get(rocksdb::ReadOptions(), inodeKey(generation, inode), &holder);
    if (s.IsNotFound()) {
      taken.insert(inode);
      return inode;
    }
    GRANARY_RETURN_IF_ERROR(fromRocks(s, "manifest inode index"));
  }
}

Status ManifestStore::put(std::string_view generation, std::span<const ManifestEntry> files,
                          const ListingProgress* progress) {
  MutexLock lock(putMutex_);
  GRANARY_ASSIGN_OR_RETURN(uint64_t next, nextInode(generation));
  std::string group;                  // the value of the inode group `next` is in
  if (next % kInodesPerGroup != 0) {  // else the group is new
    GRANARY_ASSIGN_OR_RETURN(group, storedGroup(generation, next));
  }
  rocksdb::WriteBatch batch;
  std::set<std::string_view> directories;
  for (const ManifestEntry& file : files) {
    GRANARY_RETURN_IF_ERROR(validateManifestPath(file.path));
    const auto [parent, name] = splitPath(file.path);
    batch.Put(files_, key(generation, parent, name), encode(file, next));
    if (group.empty()) group += static_cast<char>(next % kInodesPerGroup);  // its first slot
    appendToGroup(group, file.path);
    if (++next % kInodesPerGroup == 0) {
      batch.Put(inodes_, groupKey(generation, next - 1), group);
      group.clear();
    }
    for (std::string_view dir = splitPath(file.path).first; !dir.empty();
         dir = splitPath(dir).first) {
      if (!directories.insert(dir).second) break;  // its parents are in the set already
    }
  }
  if (!files.empty() && !group.empty()) batch.Put(inodes_, groupKey(generation, next - 1), group);
  GRANARY_RETURN_IF_ERROR(addDirectories(generation, directories, batch));
  std::string counter;
  append<uint64_t>(counter, next);
  batch.Put(counterKey(generation), counter);
  if (progress) batch.Put(progressKey(generation), encodeProgress(*progress));
  GRANARY_RETURN_IF_ERROR(write(static_cast<int64_t>(batch.GetDataSize()),
                                [&] { return db_->Write(rocksdb::WriteOptions(), &batch); }));
  nextInodes_[std::string(generation)] = next;
  return Status::ok();
}

Result<std::string> ManifestStore::storedGroup(std::string_view generation, uint64_t inode) const {
  std::string group;
  const std::string at = groupKey(generation, inode);
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), inodes_, at, &group);
  if (s.IsNotFound()) s = db_->Get(rocksdb::ReadOptions(), at, &group);  // an older store's
  if (s.IsNotFound()) return std::string();  // dropped since, or never written
  GRANARY_RETURN_IF_ERROR(fromRocks(s, "manifest inode index"));
  return group;
}

Status ManifestStore::addDirectories(std::string_view generation,
                                     const std::set<std::string_view>& directories,
                                     rocksdb::WriteBatch& batch) const {
  std::set<uint64_t> taken;  // directory inodes given out in this batch
  for (std::string_view dir : directories) {
    const auto [parent, name] = splitPath(dir);
    std::string stored;
    const rocksdb::Status s =
        db_->Get(rocksdb::ReadOptions(), key(generation, parent, name), &stored);
    if (s.ok()) continue;  // an earlier batch's, with its inode (directories are in the default)
    if (!s.IsNotFound()) return fromRocks(s, "manifest read");
    GRANARY_ASSIGN_OR_RETURN(const uint64_t inode, directoryInode(generation, dir, taken));
    batch.Put(key(generation, parent, name),
              encode(ManifestEntry{.mode = 0555, .directory = true}, inode));
    batch.Put(inodeKey(generation, inode), dir);
  }
  return Status::ok();
}

Result<ManifestEntry> ManifestStore::stat(std::string_view generation,
                                          std::string_view path) const {
  if (path.empty()) return ManifestEntry{.inode = kRootInode, .mode = 0555, .directory = true};
  GRANARY_RETURN_IF_ERROR(validateManifestPath(path));
  const auto [parent, name] = splitPath(path);
  return entryAt(key(generation, parent, name), std::string(path));
}

Result<ManifestEntry> ManifestStore::statInode(std::string_view generation, uint64_t inode) const {
  if (inode == kRootInode) return stat(generation, "");
  std::string path;
  if (inode < kDirectoryInodes) {
    GRANARY_ASSIGN_OR_RETURN(const std::string group, storedGroup(generation, inode));
    if (const auto found = pathInGroup(group, inode)) return stat(generation, *found);
  }
  // A directory, or an entry of a store written before files were counted.
  const rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), inodeKey(generation, inode), &path);
  if (s.IsNotFound()) return notFound("inode " + std::to_string(inode) + " is not in the dataset");
  GRANARY_RETURN_IF_ERROR(fromRocks(s, "manifest inode index"));
  return stat(generation, path);
}

Result<std::vector<ManifestEntry>> ManifestStore::list(std::string_view generation,
                                                       std::string_view directory,
                                                       std::string_view after, size_t limit) const {
  if (!directory.empty()) GRANARY_RETURN_IF_ERROR(validateManifestPath(directory));
  const std::string prefix = key(generation, directory, "");
  // Around the block cache: a mount asks for each directory once (the kernel keeps what readdir
  // returns), so a directory of millions of entries would only push out what lookups use.
  const std::string start = after.empty() ? prefix : key(generation, directory, after);
  const auto it = scan(start, prefix);
  std::vector<ManifestEntry> out;
  if (!after.empty() && it->Valid() && it->key().ToStringView() == start) it->Next();
  for (; it->Valid() && out.size() < limit; it->Next()) {
    const std::string_view k = it->key().ToStringView();
    if (k.substr(0, prefix.size()) != prefix) break;
    const std::string_view name = k.substr(prefix.size());
    std::string path =
        directory.empty() ? std::string(name) : std::string(directory) + "/" + std::string(name);
    GRANARY_ASSIGN_OR_RETURN(ManifestEntry entry,
                             decode(std::move(path), it->value().ToStringView()));
    out.push_back(std::move(entry));
  }
  GRANARY_RETURN_IF_ERROR(fromRocks(it->status(), "manifest scan"));
  if (out.empty() && !directory.empty()) {
    // An empty page of a directory that does not exist is an error; of one that does, not.
    GRANARY_ASSIGN_OR_RETURN(ManifestEntry dir, stat(generation, directory));
    if (!dir.directory) return failedPrecondition("\"" + std::string(directory) + "\" is a file");
  }
  return out;
}

Result<std::vector<ManifestEntry>> ManifestStore::files(std::string_view generation,
                                                        std::string& cursor, size_t limit) const {
  const std::string prefix = generationPrefix('m', generation);
  const auto it = scan(cursor.empty() ? prefix : cursor, prefix);
  std::vector<ManifestEntry> out;
  if (!cursor.empty() && it->Valid() && it->key().ToStringView() == cursor) it->Next();
  for (; it->Valid() && out.size() < limit; it->Next()) {
    const std::string_view k = it->key().ToStringView();
    if (!k.starts_with(prefix)) break;
    cursor = std::string(k);
    const std::string_view rest = k.substr(prefix.size());  // parent NUL name
    const size_t nul = rest.find('\0');
    const std::string_view parent = rest.substr(0, nul), name = rest.substr(nul + 1);
    std::string path =
        parent.empty() ? std::string(name) : std::string(parent) + "/" + std::string(name);
    GRANARY_ASSIGN_OR_RETURN(ManifestEntry entry,
                             decode(std::move(path), it->value().ToStringView()));
    if (!entry.directory) out.push_back(std::move(entry));
  }
  GRANARY_RETURN_IF_ERROR(fromRocks(it->status(), "manifest scan"));
  return out;
}

Result<std::vector<std::string>> ManifestStore::completedGenerations(
    std::string_view prefix) const {
  const std::string start = completionKey(prefix);
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  std::vector<std::string> out;
  for (it->Seek(start); it->Valid() && it->key().starts_with(start); it->Next())
    out.emplace_back(it->key().ToStringView().substr(2));  // past "c" NUL
  GRANARY_RETURN_IF_ERROR(fromRocks(it->status(), "manifest completion marks"));
  return out;
}

Result<ListingProgress> ManifestStore::progress(std::string_view generation) const {
  std::string value;
  const rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), progressKey(generation), &value);
  if (s.IsNotFound()) return notFound("no listing of " + std::string(generation) + " is under way");
  GRANARY_RETURN_IF_ERROR(fromRocks(s, "manifest listing progress"));
  auto progress = decodeProgress(value);
  if (!progress) return corruption("manifest listing progress of " + std::string(generation));
  return std::move(*progress);
}

Status ManifestStore::markComplete(std::string_view generation, ManifestTotals totals) {
  std::string value;
  append<int64_t>(value, totals.files);
  append<int64_t>(value, totals.bytes);
  rocksdb::WriteBatch batch;
  batch.Put(completionKey(generation), value);
  batch.Delete(progressKey(generation));
  return write(64, [&] { return db_->Write(rocksdb::WriteOptions(), &batch); });
}

Result<ManifestTotals> ManifestStore::totals(std::string_view generation) const {
  std::string value;
  const rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), completionKey(generation), &value);
  if (s.IsNotFound())
    return notFound("the listing of " + std::string(generation) + " is incomplete");
  GRANARY_RETURN_IF_ERROR(fromRocks(s, "manifest completion mark"));
  if (value.size() != 16)
    return corruption("manifest completion mark of " + std::string(generation));
  std::string_view in = value;
  ManifestTotals totals;
  totals.files = read<int64_t>(in);
  totals.bytes = read<int64_t>(in);
  return totals;
}

Status ManifestStore::drop(std::string_view generation) {
  rocksdb::WriteBatch marks;
  marks.Delete(completionKey(generation));
  marks.Delete(progressKey(generation));
  GRANARY_RETURN_IF_ERROR(write(64, [&] { return db_->Write(rocksdb::WriteOptions(), &marks); }));
  // Each kind where this store writes it, and in the default family, where an older one did.
  const std::pair<char, rocksdb::ColumnFamilyHandle*> kinds[] = {{'m', files_},
                                                                 {'g', inodes_},
                                                                 {'m', handles_.front()},
                                                                 {'g', handles_.front()},
                                                                 {'i', handles_.front()}};
  for (const auto& [kind, where] : kinds) {
    rocksdb::ColumnFamilyHandle* const family = where;  // a lambda cannot capture a binding
    // kind NUL generation, then kind NUL generation \1: every key of the generation lies between,
    // and neither bound is in GenerationPrefix's domain (the memtable's insert hints are kept
    // per prefix, and RocksDB would use a point key's hint to place a range deletion).
    std::string begin = generationPrefix(kind, generation);
    begin.pop_back();
    const std::string end = begin + '\1';
    GRANARY_RETURN_IF_ERROR(
        write(64, [&] { return db_->DeleteRange(rocksdb::WriteOptions(), family, begin, end); }));
  }
  return Status::ok();
}

}  // namespace granary::cache

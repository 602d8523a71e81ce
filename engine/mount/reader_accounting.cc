#include "engine/mount/reader_accounting.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>

namespace granary::cache {
namespace {

constexpr auto kLookupLifetime = std::chrono::seconds(30);

bool isUidCharacter(char c) {
  return std::isxdigit(static_cast<unsigned char>(c)) || c == '-' || c == '_';
}

}  // namespace

std::string podUidFromCgroup(std::string_view text) {
  // The last "pod" followed by a 36-character UID ('_' for '-' under systemd) that ends a path
  // segment or a ".slice" name.
  for (size_t at = text.rfind("pod"); at != std::string_view::npos;
       at = at == 0 ? std::string_view::npos : text.rfind("pod", at - 1)) {
    const std::string_view rest = text.substr(at + 3);
    if (rest.size() < 36) continue;
    std::string uid(rest.substr(0, 36));
    if (!std::all_of(uid.begin(), uid.end(), isUidCharacter)) continue;
    const std::string_view after = rest.substr(36);
    if (!(after.empty() || after.front() == '/' || after.front() == '\n' ||
          after.starts_with(".slice")))
      continue;
    std::replace(uid.begin(), uid.end(), '_', '-');
    if (uid[8] != '-' || uid[13] != '-' || uid[18] != '-' || uid[23] != '-') continue;
    return uid;
  }
  return "";
}

ProcessIdentity identifyThread(int tid) {
  ProcessIdentity identity{.pid = tid};
  const std::string proc = "/proc/" + std::to_string(tid);
  std::ifstream status(proc + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with("Tgid:")) {
      identity.pid = std::atoi(line.c_str() + 5);
      break;
    }
  }
  std::ifstream cgroup(proc + "/cgroup");
  std::stringstream text;
  text << cgroup.rdbuf();
  identity.podUid = podUidFromCgroup(text.str());
  std::ifstream comm("/proc/" + std::to_string(identity.pid) + "/comm");
  std::getline(comm, identity.command);
  return identity;
}

ReaderAccounting::ReaderAccounting(CacheMetrics* metrics,
                                   std::function<ProcessIdentity(int)> identify, Clock& clock)
    : metrics_(metrics), identify_(std::move(identify)), clock_(clock) {}

ProcessIdentity ReaderAccounting::identityOf(int tid) {
  const auto now = clock_.monoNow();
  {
    MutexLock lock(mutex_);
    const auto lookup = threads_.find(tid);
    if (lookup != threads_.end() && now - lookup->second.at <= kLookupLifetime)
      return lookup->second.identity;
  }
  ProcessIdentity identity = identify_(tid);  // reads /proc: not while holding the lock
  MutexLock lock(mutex_);
  if (threads_.size() > 4096) threads_.clear();  // bounded: lookups are cheap to redo
  threads_.insert_or_assign(tid, Lookup{identity, now});
  return identity;
}

ReaderAccounting::Reader& ReaderAccounting::readerLocked(const std::string& dataset,
                                                         const ProcessIdentity& identity) {
  const std::string& uid = identity.podUid;
  const int pid = identity.pid;
  ReaderKey key{.dataset = dataset, .podUid = uid, .pid = uid.empty() ? pid : 0};
  auto it = readers_.find(key);
  if (it != readers_.end()) return it->second;
  Reader reader;
  reader.totals.key = key;
  reader.totals.command = identity.command;
  SeriesLabels& labels = reader.labels;
  labels.pod = !uid.empty()                ? uid
               : !identity.command.empty() ? "process:" + identity.command
                                           : "pid:" + std::to_string(pid);
  if (const auto named = podNames_.find(uid); !uid.empty() && named != podNames_.end())
    labels = {named->second.first, named->second.second};
  if (metrics_ != nullptr) {
    const std::string& ns = labels.podNamespace;
    ++seriesUsers_[{dataset, ns, labels.pod}];
    reader.series = Series{metrics_->readWait.with({dataset, ns, labels.pod}),
                           metrics_->readerBytes.with({dataset, ns, labels.pod, "local"}),
                           metrics_->readerBytes.with({dataset, ns, labels.pod, "peer"}),
                           metrics_->readerBytes.with({dataset, ns, labels.pod, "origin"})};
  }
  return readers_.emplace(std::move(key), std::move(reader)).first->second;
}

void ReaderAccounting::beginWait(const std::string& dataset, int tid, Clock::MonoTime start) {
  const ProcessIdentity identity = identityOf(tid);
  MutexLock lock(mutex_);
  Reader& reader = readerLocked(dataset, identity);
  reader.endedAt.reset();
  reader.inFlight.insert(start);
}

void ReaderAccounting::record(const std::string& dataset, int tid, const ReadRecord& read) {
  const ProcessIdentity identity = identityOf(tid);
  MutexLock lock(mutex_);
  Reader& reader = readerLocked(dataset, identity);
  reader.endedAt.reset();
  if (read.waitBegan) {
    const auto began = reader.inFlight.find(*read.waitBegan);
    if (began != reader.inFlight.end()) reader.inFlight.erase(began);
  }
  ReaderTotals& t = reader.totals;
  const auto end = read.end == Clock::MonoTime{} ? clock_.monoNow() : read.end;
  const std::chrono::nanoseconds waited = reader.blocked.add(end - read.wait, end);
  t.wait += waited;
  t.reads.localBytes += read.localBytes;
  t.reads.peerBytes += read.peerBytes;
  t.reads.originBytes += read.originBytes;
  ++(read.wait.count() > 0 ? t.reads.chunkMisses : t.reads.chunkHits);
  ++t.operations;
  if (!reader.series) return;
  reader.series->waitSeconds.increment(std::chrono::duration<double>(waited).count());
  reader.series->localBytes.increment(static_cast<double>(read.localBytes));
  reader.series->peerBytes.increment(static_cast<double>(read.peerBytes));
  reader.series->originBytes.increment(static_cast<double>(read.originBytes));
}

void ReaderAccounting::namePod(const std::string& uid, const std::string& ns,
                               const std::string& name) {
  MutexLock lock(mutex_);
  podNames_[uid] = {ns, name};
}

std::vector<ReaderTotals> ReaderAccounting::readers() const {
  MutexLock lock(mutex_);
  std::vector<ReaderTotals> out;
  out.reserve(readers_.size());
  const auto now = clock_.monoNow();
  for (const auto& [key, reader] : readers_) {
    out.push_back(reader.totals);
    if (!reader.inFlight.empty())  // still blocked: up to now, what no ended read covered
      out.back().wait += reader.blocked.uncovered(*reader.inFlight.begin(), now);
    const auto named = podNames_.find(key.podUid);
    if (!key.podUid.empty() && named != podNames_.end()) {
      out.back().podNamespace = named->second.first;
      out.back().podName = named->second.second;
    }
  }
  return out;
}

std::map<std::string, std::chrono::nanoseconds> ReaderAccounting::waitByPod() const {
  std::map<std::string, std::chrono::nanoseconds> waits;
  for (const auto& reader : readers())
    if (!reader.podName.empty()) waits[reader.podNamespace + "/" + reader.podName] += reader.wait;
  return waits;
}

void ReaderAccounting::forgetLocked(std::map<ReaderKey, Reader>::iterator reader) {
  const std::string& dataset = reader->first.dataset;
  const SeriesLabels& labels = reader->second.labels;
  const auto users = seriesUsers_.find({dataset, labels.podNamespace, labels.pod});
  if (reader->second.series && users != seriesUsers_.end() && --users->second == 0) {
    seriesUsers_.erase(users);
    metrics_->readWait.remove({dataset, labels.podNamespace, labels.pod});
    for (const char* source : {"local", "peer", "origin"})
      metrics_->readerBytes.remove({dataset, labels.podNamespace, labels.pod, source});
  }
  const std::string uid = reader->first.podUid;
  readers_.erase(reader);
  if (uid.empty()) return;
  for (const auto& [key, r] : readers_)
    if (key.podUid == uid) return;
  podNames_.erase(uid);  // its last reader went
}

void ReaderAccounting::endPod(const std::string& dataset, const std::string& podUid) {
  MutexLock lock(mutex_);
  const auto reader = readers_.find({.dataset = dataset, .podUid = podUid, .pid = 0});
  if (reader != readers_.end()) reader->second.endedAt = clock_.monoNow();
}

int ReaderAccounting::sweep(std::chrono::nanoseconds grace,
                            const std::function<bool(int pid)>& alive) {
  std::vector<int> pids;
  {
    MutexLock lock(mutex_);
    for (const auto& [key, reader] : readers_)
      if (key.podUid.empty() && !reader.endedAt) pids.push_back(key.pid);
  }
  std::set<int> gone;
  for (int pid : pids)
    if (!alive(pid)) gone.insert(pid);  // reads /proc: not while holding the lock
  const auto now = clock_.monoNow();
  int forgotten = 0;
  MutexLock lock(mutex_);
  for (auto it = readers_.begin(); it != readers_.end();) {
    const auto next = std::next(it);
    auto& ended = it->second.endedAt;
    if (!ended && it->first.podUid.empty() && gone.contains(it->first.pid)) ended = now;
    if (ended && now - *ended >= grace) {
      forgetLocked(it);
      ++forgotten;
    }
    it = next;
  }
  return forgotten;
}

bool processAlive(int pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);)
    if (line.starts_with("State:")) return line.find('Z') == std::string::npos;
  return false;
}

}  // namespace granary::cache

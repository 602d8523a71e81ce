#include "cache-node/refreshes.h"

#include <utility>

namespace granary::cache {

namespace {

v1::RefreshDatasetResponse responseOf(const Result<ManifestChanges>& outcome) {
  v1::RefreshDatasetResponse response;
  if (!outcome.isOk()) {
    response.set_state(v1::RefreshDatasetResponse::STATE_FAILED);
    response.set_message(outcome.status().message());
    return response;
  }
  const ManifestChanges& changes = *outcome;
  response.set_state(changes.any() ? v1::RefreshDatasetResponse::STATE_CHANGED
                                   : v1::RefreshDatasetResponse::STATE_UNCHANGED);
  response.set_listed_files(changes.added + changes.changed + changes.unchanged);
  response.set_added(changes.added);
  response.set_changed(changes.changed);
  response.set_removed(changes.removed);
  response.set_unchanged(changes.unchanged);
  return response;
}

}  // namespace

Refreshes::~Refreshes() {
  std::map<std::string, std::unique_ptr<Refresh>> stopping;
  {
    MutexLock lock(mutex_);
    stopping.swap(refreshes_);
  }
  // Destroying each stops its thread and waits for it (outside the lock: it takes none of it).
}

Result<v1::RefreshDatasetResponse> Refreshes::request(const DatasetKey& current, int64_t next) {
  GRANARY_ASSIGN_OR_RETURN(const std::shared_ptr<DatasetCache> serving, engine_.find(current));
  const DatasetKey& key = serving->key();
  const std::string dataset = key.ns + "/" + key.name + "/" + key.uid;
  std::unique_ptr<Refresh> ended;  // destroyed (joined) outside the lock
  MutexLock lock(mutex_);
  auto it = refreshes_.find(dataset);
  if (it != refreshes_.end()) {
    Refresh& refresh = *it->second;
    if (refresh.current == key.generation && refresh.next == next) {
      MutexLock refreshLock(refresh.mutex);
      if (!refresh.outcome) {
        v1::RefreshDatasetResponse running;
        running.set_state(v1::RefreshDatasetResponse::STATE_RUNNING);
        running.set_listed_files(refresh.listed.load());
        return running;
      }
      v1::RefreshDatasetResponse done = responseOf(*refresh.outcome);
      ended = std::move(it->second);
      refreshes_.erase(it);
      return done;
    }
    ended = std::move(it->second);  // other versions: stopped for these
    refreshes_.erase(it);
  }
  if (const std::string lister = serving->listerOf(next); lister != engine_.nodeName()) {
    v1::RefreshDatasetResponse elsewhere;
    elsewhere.set_state(v1::RefreshDatasetResponse::STATE_ELSEWHERE);
    elsewhere.set_lister(lister);
    return elsewhere;
  }
  refreshes_[dataset] = start(key, next);
  v1::RefreshDatasetResponse started;
  started.set_state(v1::RefreshDatasetResponse::STATE_RUNNING);
  started.set_started(true);
  return started;
}

std::unique_ptr<Refreshes::Refresh> Refreshes::start(const DatasetKey& current, int64_t next) {
  auto refresh = std::make_unique<Refresh>();
  refresh->current = current.generation;
  refresh->next = next;
  Refresh* r = refresh.get();
  r->thread = std::jthread([this, r, current, next](std::stop_token stop) {
    Result<ManifestChanges> outcome = engine_.refresh(
        current, next, stop, [r](const ManifestTotals& totals) { r->listed = totals.files; });
    MutexLock lock(r->mutex);
    r->outcome = std::move(outcome);
  });
  return refresh;
}

}  // namespace granary::cache

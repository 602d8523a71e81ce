// An informer keeps a Store equal to the server's view of one resource type: list, then watch
// from the list's resourceVersion with bookmarks; resume after the server ends a watch or the
// connection drops; re-list when the resourceVersion is too old (410); back off exponentially
// while the server is unreachable. Handlers run on the informer's thread after the store is
// updated, and should only enqueue keys.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <stop_token>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/kube/client.h"
#include "common/kube/store.h"
#include "common/thread_annotations.h"

namespace granary::kube {

struct InformerOptions {
  ResourceType type;
  std::string ns;  // "" for all namespaces
  std::string labelSelector;
  std::string fieldSelector;
  // Page size of lists. Default 500, as client-go.
  int64_t pageSize = 500;
  // The server ends each watch after about this long; the informer resumes it. Default 300 s.
  int watchTimeoutSeconds = 300;
  // Every `resync`, every cached object is delivered again as an update (old == new); 0: never.
  std::chrono::milliseconds resync{0};
  // Delays between failed lists or watches. Default 800 ms growing to 30 s, as client-go.
  BackoffOptions backoff{.initial = std::chrono::milliseconds(800)};
  // Applied to every object before it is stored (e.g. to drop managedFields and fields no
  // handler reads): caches of many objects shrink accordingly. Must keep metadata.name,
  // namespace and resourceVersion.
  std::function<Json(Json)> transform;
  // Observers, called on the informer's thread (e.g. to count in metrics).
  std::function<void()> onWatchRestart;
  std::function<void()> onRelist;
};

struct EventHandler {
  std::function<void(const ObjectPtr& object)> onAdd;
  std::function<void(const ObjectPtr& previous, const ObjectPtr& object)> onUpdate;
  std::function<void(const ObjectPtr& object)> onDelete;
};

class Informer {
 public:
  // `client` and `clock` must outlive the informer.
  Informer(Client& client, InformerOptions options, Clock& clock = realClock());
  ~Informer();  // stops

  Store& store() { return store_; }
  const InformerOptions& options() const { return options_; }

  // Handlers added after start() see only later changes.
  void addHandler(EventHandler handler);

  void start();
  void stop();

  // True once the first list has been stored.
  bool hasSynced() const { return synced_; }
  // Blocks until synced or `stop`; returns hasSynced().
  bool waitForSync(std::stop_token stop);

  // Watches resumed after they ended, and lists after the first (410 or failures).
  int64_t watchRestarts() const { return watchRestarts_; }
  int64_t relists() const { return relists_; }

 private:
  void run(std::stop_token stop);
  void resyncLoop(std::stop_token stop);
  // Lists and replaces the store; returns the list's resourceVersion.
  Result<std::string> listAndReplace();
  void apply(WatchEvent&& event, std::string& resourceVersion);

  Client& client_;
  InformerOptions options_;
  Clock& clock_;
  Store store_;

  Mutex handlersMutex_;
  std::vector<EventHandler> handlers_ GRANARY_GUARDED_BY(handlersMutex_);

  Mutex syncMutex_;                          // pairs with syncChanged_; synced_ is atomic
  std::condition_variable_any syncChanged_;  // waits on syncMutex_
  std::atomic<bool> synced_{false};
  std::atomic<int64_t> watchRestarts_{0};
  std::atomic<int64_t> relists_{0};
  std::jthread thread_;
  std::jthread resyncThread_;
};

}  // namespace granary::kube

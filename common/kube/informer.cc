#include "common/kube/informer.h"

#include "common/log.h"

namespace granary::kube {
namespace {

const Logger& logger() {
  static const Logger log("informer");
  return log;
}

}  // namespace

Informer::Informer(Client& client, InformerOptions options, Clock& clock)
    : client_(client), options_(std::move(options)), clock_(clock) {}

Informer::~Informer() { stop(); }

void Informer::addHandler(EventHandler handler) {
  MutexLock lock(handlersMutex_);
  handlers_.push_back(std::move(handler));
}

void Informer::start() {
  if (thread_.joinable()) return;
  thread_ = std::jthread([this](std::stop_token stop) { run(stop); });
  if (options_.resync.count() > 0) {
    resyncThread_ = std::jthread([this](std::stop_token stop) { resyncLoop(stop); });
  }
}

void Informer::stop() {
  if (resyncThread_.joinable()) {
    resyncThread_.request_stop();
    resyncThread_.join();
  }
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
}

bool Informer::waitForSync(std::stop_token stop) {
  MutexLock lock(syncMutex_);
  syncChanged_.wait(lock, stop, [this] { return synced_.load(); });
  return synced_;
}

Result<std::string> Informer::listAndReplace() {
  GRANARY_ASSIGN_OR_RETURN(ListResult listed,
                           client_.listAll(options_.type, options_.ns,
                                           {.labelSelector = options_.labelSelector,
                                            .fieldSelector = options_.fieldSelector,
                                            .limit = options_.pageSize}));
  std::vector<ObjectPtr> objects;
  objects.reserve(listed.items.size());
  for (auto& item : listed.items) {
    if (options_.transform) item = options_.transform(std::move(item));
    objects.push_back(std::make_shared<const Json>(std::move(item)));
  }

  // Work out what changed against the cache before replacing it, to notify handlers.
  std::vector<std::pair<ObjectPtr, ObjectPtr>> changes;  // previous (null if new), current
  for (const auto& object : objects) {
    ObjectPtr previous = store_.get(objectKey(*object));
    if (!previous || resourceVersionOf(*previous) != resourceVersionOf(*object)) {
      changes.emplace_back(std::move(previous), object);
    }
  }
  const std::vector<ObjectPtr> dropped = store_.replace(std::move(objects));

  MutexLock lock(handlersMutex_);
  for (const auto& handler : handlers_) {
    for (const auto& [previous, current] : changes) {
      if (!previous && handler.onAdd) handler.onAdd(current);
      if (previous && handler.onUpdate) handler.onUpdate(previous, current);
    }
    for (const auto& gone : dropped) {
      if (handler.onDelete) handler.onDelete(gone);
    }
  }
  return listed.resourceVersion;
}

void Informer::apply(WatchEvent&& event, std::string& resourceVersion) {
  const std::string rv = resourceVersionOf(event.object);
  if (!rv.empty()) resourceVersion = rv;
  if (event.type == WatchEvent::Type::kBookmark) return;
  if (options_.transform) event.object = options_.transform(std::move(event.object));
  auto object = std::make_shared<const Json>(std::move(event.object));
  ObjectPtr previous;
  if (event.type == WatchEvent::Type::kDeleted) {
    previous = store_.erase(objectKey(*object));
  } else {
    previous = store_.upsert(object);
  }
  MutexLock lock(handlersMutex_);
  for (const auto& handler : handlers_) {
    if (event.type == WatchEvent::Type::kDeleted) {
      if (handler.onDelete) handler.onDelete(previous ? previous : object);
    } else if (previous) {
      if (handler.onUpdate) handler.onUpdate(previous, object);
    } else if (handler.onAdd) {
      handler.onAdd(object);
    }
  }
}

void Informer::run(std::stop_token stop) {
  Backoff backoff(options_.backoff);
  const std::string what = options_.type.plural + (options_.ns.empty() ? "" : " in " + options_.ns);
  bool first = true;
  while (!stop.stop_requested()) {
    if (!first) {
      ++relists_;
      if (options_.onRelist) options_.onRelist();
    }
    first = false;
    auto listed = listAndReplace();
    if (!listed.isOk()) {
      logger().warn("list failed; retrying", {{"resource", what}, {"error", listed.status()}});
      clock_.sleepFor(backoff.next(), stop);
      continue;
    }
    if (!synced_.exchange(true)) {
      MutexLock lock(syncMutex_);
      syncChanged_.notify_all();
    }
    backoff.reset();
    std::string resourceVersion = *listed;

    while (!stop.stop_requested()) {
      const Status watched = client_.watch(
          options_.type, options_.ns,
          {.labelSelector = options_.labelSelector,
           .fieldSelector = options_.fieldSelector,
           .resourceVersion = resourceVersion,
           .timeoutSeconds = options_.watchTimeoutSeconds},
          [&](WatchEvent&& event) {
            apply(std::move(event), resourceVersion);
            backoff.reset();
          },
          stop);
      if (stop.stop_requested() || watched.code() == StatusCode::kCancelled) return;
      ++watchRestarts_;
      if (options_.onWatchRestart) options_.onWatchRestart();
      if (watched.code() == StatusCode::kGone) {
        logger().info("resourceVersion too old; re-listing", {{"resource", what}});
        break;
      }
      if (!watched.isOk()) {
        logger().warn("watch failed; resuming", {{"resource", what}, {"error", watched}});
        clock_.sleepFor(backoff.next(), stop);
      }
    }
  }
}

void Informer::resyncLoop(std::stop_token stop) {
  while (clock_.sleepFor(options_.resync, stop)) {
    const auto objects = store_.list();
    MutexLock lock(handlersMutex_);
    for (const auto& handler : handlers_) {
      if (!handler.onUpdate) continue;
      for (const auto& object : objects) handler.onUpdate(object, object);
    }
  }
}

}  // namespace granary::kube

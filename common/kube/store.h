// A thread-safe cache of objects keyed by namespace/name, with indexes (objects by namespace,
// by node, by owner, ...) kept up to date on every change. Filled by an Informer; read by
// controllers. Objects are immutable once stored (ObjectPtr), so readers never copy.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/kube/object.h"
#include "common/thread_annotations.h"

namespace granary::kube {

// The index values of an object (e.g. its node name); empty when it is not indexed.
using IndexFunction = std::function<std::vector<std::string>(const Json&)>;

// Common indexes.
IndexFunction indexByNamespace();
IndexFunction indexByLabel(std::string label);
// Pods by spec.nodeName (unscheduled pods are not indexed).
IndexFunction indexPodsByNode();
// Objects by the uid of each owner reference.
IndexFunction indexByOwnerUid();

class Store {
 public:
  // Adds an index. Call before the store is filled.
  void addIndex(const std::string& name, IndexFunction function);

  // Inserts or replaces; returns the previous object (null if new).
  ObjectPtr upsert(ObjectPtr object);
  // Removes by key; returns the removed object (null if absent).
  ObjectPtr erase(const std::string& key);
  // Replaces the whole contents; returns the objects that were dropped (absent from `objects`).
  std::vector<ObjectPtr> replace(std::vector<ObjectPtr> objects);

  ObjectPtr get(const std::string& key) const;
  std::vector<ObjectPtr> list() const;
  std::vector<std::string> keys() const;
  std::vector<ObjectPtr> byIndex(const std::string& index, const std::string& value) const;
  size_t size() const;

 private:
  void indexLocked(const std::string& key, const Json& object) GRANARY_REQUIRES(mutex_);
  void unindexLocked(const std::string& key, const Json& object) GRANARY_REQUIRES(mutex_);

  mutable SharedMutex mutex_;
  std::map<std::string, ObjectPtr> objects_ GRANARY_GUARDED_BY(mutex_);
  std::map<std::string, IndexFunction> functions_ GRANARY_GUARDED_BY(mutex_);
  // Index name → value → keys.
  std::map<std::string, std::map<std::string, std::set<std::string>>> indexes_
      GRANARY_GUARDED_BY(mutex_);
};

}  // namespace granary::kube

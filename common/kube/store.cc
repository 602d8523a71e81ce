#include "common/kube/store.h"

namespace granary::kube {

IndexFunction indexByNamespace() {
  return [](const Json& o) -> std::vector<std::string> {
    const std::string ns = namespaceOf(o);
    return ns.empty() ? std::vector<std::string>{} : std::vector<std::string>{ns};
  };
}

IndexFunction indexByLabel(std::string label) {
  return [label = std::move(label)](const Json& o) -> std::vector<std::string> {
    const auto labels = stringMap(o);
    const auto it = labels.find(label);
    return it == labels.end() ? std::vector<std::string>{} : std::vector<std::string>{it->second};
  };
}

IndexFunction indexPodsByNode() {
  return [](const Json& o) -> std::vector<std::string> {
    const Json node = pathValue(o, "spec.nodeName");
    if (!node.is_string() || node.as_string().empty()) return {};
    return {node.as_string()};
  };
}

IndexFunction indexByOwnerUid() {
  return [](const Json& o) {
    std::vector<std::string> owners;
    const Json refs = pathValue(o, "metadata.ownerReferences");
    if (!refs.is_array()) return owners;
    for (const auto& ref : refs.as_array()) {
      if (ref.has_string_field("uid")) owners.push_back(ref.at("uid").as_string());
    }
    return owners;
  };
}

void Store::addIndex(const std::string& name, IndexFunction function) {
  WriterMutexLock lock(mutex_);
  functions_[name] = std::move(function);
  auto& index = indexes_[name];
  index.clear();
  for (const auto& [key, object] : objects_) {
    for (const auto& value : functions_[name](*object)) index[value].insert(key);
  }
}

void Store::indexLocked(const std::string& key, const Json& object) {
  for (const auto& [name, function] : functions_) {
    for (const auto& value : function(object)) indexes_[name][value].insert(key);
  }
}

void Store::unindexLocked(const std::string& key, const Json& object) {
  for (const auto& [name, function] : functions_) {
    auto& index = indexes_[name];
    for (const auto& value : function(object)) {
      const auto it = index.find(value);
      if (it == index.end()) continue;
      it->second.erase(key);
      if (it->second.empty()) index.erase(it);
    }
  }
}

ObjectPtr Store::upsert(ObjectPtr object) {
  const std::string key = objectKey(*object);
  WriterMutexLock lock(mutex_);
  ObjectPtr& slot = objects_[key];
  ObjectPtr previous = std::move(slot);
  if (previous) unindexLocked(key, *previous);
  indexLocked(key, *object);
  slot = std::move(object);
  return previous;
}

ObjectPtr Store::erase(const std::string& key) {
  WriterMutexLock lock(mutex_);
  const auto it = objects_.find(key);
  if (it == objects_.end()) return nullptr;
  ObjectPtr previous = std::move(it->second);
  objects_.erase(it);
  unindexLocked(key, *previous);
  return previous;
}

std::vector<ObjectPtr> Store::replace(std::vector<ObjectPtr> objects) {
  std::map<std::string, ObjectPtr> next;
  for (auto& object : objects) {
    std::string key = objectKey(*object);
    next.emplace(std::move(key), std::move(object));
  }
  WriterMutexLock lock(mutex_);
  std::vector<ObjectPtr> dropped;
  for (const auto& [key, object] : objects_) {
    if (!next.count(key)) dropped.push_back(object);
  }
  objects_ = std::move(next);
  for (auto& [name, index] : indexes_) index.clear();
  for (const auto& [key, object] : objects_) indexLocked(key, *object);
  return dropped;
}

ObjectPtr Store::get(const std::string& key) const {
  ReaderMutexLock lock(mutex_);
  const auto it = objects_.find(key);
  return it == objects_.end() ? nullptr : it->second;
}

std::vector<ObjectPtr> Store::list() const {
  ReaderMutexLock lock(mutex_);
  std::vector<ObjectPtr> out;
  out.reserve(objects_.size());
  for (const auto& [key, object] : objects_) out.push_back(object);
  return out;
}

std::vector<std::string> Store::keys() const {
  ReaderMutexLock lock(mutex_);
  std::vector<std::string> out;
  out.reserve(objects_.size());
  for (const auto& [key, object] : objects_) out.push_back(key);
  return out;
}

std::vector<ObjectPtr> Store::byIndex(const std::string& index, const std::string& value) const {
  ReaderMutexLock lock(mutex_);
  std::vector<ObjectPtr> out;
  const auto byName = indexes_.find(index);
  if (byName == indexes_.end()) return out;
  const auto keys = byName->second.find(value);
  if (keys == byName->second.end()) return out;
  for (const auto& key : keys->second) out.push_back(objects_.at(key));
  return out;
}

size_t Store::size() const {
  ReaderMutexLock lock(mutex_);
  return objects_.size();
}

}  // namespace granary::kube

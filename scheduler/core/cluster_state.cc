#include "scheduler/core/cluster_state.h"

namespace granary::scheduler {

void ClusterState::upsertNode(NodeInfo node) {
  MutexLock lock(mutex_);
  if (const auto it = index_.find(node.name); it != index_.end()) {
    NodeInfo& existing = nodes_[it->second];
    node.requested = existing.requested;
    fullness_.remove(existing);
    existing = std::move(node);
    fullness_.add(existing);
    free_.update(it->second, existing);
    return;
  }
  node.requested = {};
  for (const auto& [key, pod] : pods_) {
    if (pod.node == node.name) node.requested += pod.requests;
  }
  const size_t position = nodes_.size();
  index_[node.name] = position;
  nodes_.push_back(std::move(node));
  fullness_.add(nodes_.back());
  free_.update(position, nodes_.back());
}

void ClusterState::removeNode(const std::string& name) {
  MutexLock lock(mutex_);
  const auto it = index_.find(name);
  if (it == index_.end()) return;
  const size_t position = it->second;
  index_.erase(it);
  fullness_.remove(nodes_[position]);
  free_.erase(position);
  const size_t last = nodes_.size() - 1;
  if (position != last) {  // the last node moves into the gap
    free_.erase(last);
    nodes_[position] = std::move(nodes_.back());
    index_[nodes_[position].name] = position;
    free_.update(position, nodes_[position]);
  }
  nodes_.pop_back();
}

void ClusterState::chargeLocked(const std::string& node, const Resources& requests, bool add) {
  const auto it = index_.find(node);
  if (it == index_.end()) return;
  NodeInfo& info = nodes_[it->second];
  fullness_.remove(info);
  if (add) {
    info.requested += requests;
  } else {
    info.requested -= requests;
  }
  fullness_.add(info);
  free_.update(it->second, info);
}

void ClusterState::addLocked(const std::string& podKey, PodEntry entry) {
  removeLocked(podKey);
  chargeLocked(entry.node, entry.requests, true);
  pods_[podKey] = std::move(entry);
}

void ClusterState::removeLocked(const std::string& podKey) {
  const auto it = pods_.find(podKey);
  if (it == pods_.end()) return;
  chargeLocked(it->second.node, it->second.requests, false);
  pods_.erase(it);
}

void ClusterState::observeBound(const std::string& podKey, const std::string& node,
                                const Resources& requests) {
  MutexLock lock(mutex_);
  addLocked(podKey, {node, requests, false});
}

void ClusterState::observeGone(const std::string& podKey) {
  MutexLock lock(mutex_);
  removeLocked(podKey);
}

void ClusterState::assume(const std::string& podKey, const std::string& node,
                          const Resources& requests) {
  MutexLock lock(mutex_);
  addLocked(podKey, {node, requests, true});
}

void ClusterState::forget(const std::string& podKey) {
  MutexLock lock(mutex_);
  const auto it = pods_.find(podKey);
  if (it != pods_.end() && it->second.assumed) removeLocked(podKey);
}

bool ClusterState::isAssumed(const std::string& podKey) const {
  MutexLock lock(mutex_);
  const auto it = pods_.find(podKey);
  return it != pods_.end() && it->second.assumed;
}

void ClusterState::read(const std::function<void(const std::vector<NodeInfo>&)>& read) const {
  MutexLock lock(mutex_);
  read(nodes_);
}

void ClusterState::readIndexed(const std::function<void(const IndexedNodes&)>& read) const {
  MutexLock lock(mutex_);
  read(IndexedNodes{.nodes = nodes_, .positions = index_, .free = free_, .fullness = fullness_});
}

size_t ClusterState::nodeCount() const {
  MutexLock lock(mutex_);
  return nodes_.size();
}

std::string ClusterState::nodeOf(const std::string& podKey) const {
  MutexLock lock(mutex_);
  const auto it = pods_.find(podKey);
  return it == pods_.end() ? "" : it->second.node;
}

}  // namespace granary::scheduler

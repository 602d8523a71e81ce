#include "scheduler/core/cluster_state.h"

namespace granary::scheduler {

NodeInfo* ClusterState::findLocked(const std::string& name) {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &nodes_[it->second];
}

void ClusterState::upsertNode(NodeInfo node) {
  MutexLock lock(mutex_);
  if (NodeInfo* existing = findLocked(node.name)) {
    node.requested = existing->requested;
    *existing = std::move(node);
    return;
  }
  node.requested = {};
  for (const auto& [key, pod] : pods_) {
    if (pod.node == node.name) node.requested += pod.requests;
  }
  index_[node.name] = nodes_.size();
  nodes_.push_back(std::move(node));
}

void ClusterState::removeNode(const std::string& name) {
  MutexLock lock(mutex_);
  const auto it = index_.find(name);
  if (it == index_.end()) return;
  const size_t position = it->second;
  index_.erase(it);
  if (position + 1 != nodes_.size()) {
    nodes_[position] = std::move(nodes_.back());
    index_[nodes_[position].name] = position;
  }
  nodes_.pop_back();
}

void ClusterState::addLocked(const std::string& podKey, PodEntry entry) {
  removeLocked(podKey);
  if (NodeInfo* node = findLocked(entry.node)) node->requested += entry.requests;
  pods_[podKey] = std::move(entry);
}

void ClusterState::removeLocked(const std::string& podKey) {
  const auto it = pods_.find(podKey);
  if (it == pods_.end()) return;
  if (NodeInfo* node = findLocked(it->second.node)) node->requested -= it->second.requests;
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

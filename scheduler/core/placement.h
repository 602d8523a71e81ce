// Gang placement: all workers of a job on nodes that pass every filter, scored by how much
// of the job's data each node caches, then by GPU packing, with spreading only to break ties.
// Pure: the caller owns the cluster state and applies (assumes) the placements it accepts.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "scheduler/core/model.h"
#include "scheduler/core/node_index.h"

namespace granary::scheduler {

struct ScoreWeights {
  // Bytes-weighted fraction of the job's datasets cached on the node, relative to the best node
  // for the job (0..1). Dominant.
  double locality = 100;
  // How full the node's GPUs (CPU for GPU-less pods) are once the pod is on it (0..1): fills
  // partly used nodes first and keeps whole nodes free for large gangs.
  double packing = 10;
  // Subtracted for a node that caches other jobs' data but none of this job's; on a node that
  // caches this job's too, three quarters of it for each other dataset, times how full that
  // dataset's caching nodes are (DatasetFullness): keeps such nodes for their readers, the more
  // the less room those readers have left. Outweighs packing, never locality.
  double reserve = 20;
  // Fewer pods on the node (0..1); breaks ties.
  double spread = 1;
};

struct Placement {
  std::string podKey;
  std::string node;
  double locality = 0;  // of that node for this job
};

struct GangDecision {
  bool placed = false;
  std::vector<Placement> placements;  // every member when placed, none otherwise
  // Why not, for people: "0/5000 nodes are available for 8 workers: ..." (PodScheduled=False).
  std::string reason;
  // Mean locality of the placements, and the best any node offered (for the achieved/best
  // ratio the scheduler reports).
  double locality = 0;
  double bestLocality = 0;
  // Decided by scoring every node: an index's candidates could not take the gang (or the
  // cluster is small enough to scan).
  bool scannedEveryNode = false;
};

// The bytes-weighted fraction of a job's datasets cached on each node: computed once per job,
// looked up per node.
class DataLocality {
 public:
  explicit DataLocality(const std::vector<DatasetCache>& datasets);
  // 0 for nodes that cache none of the data, and for jobs without datasets.
  double at(const std::string& node) const;
  // The highest of any node.
  double best() const { return best_; }

 private:
  std::unordered_map<std::string, double> byNode_;
  double best_ = 0;
};

// DataLocality(datasets).at(node), for one node.
double localityOf(const std::string& node, const std::vector<DatasetCache>& datasets);

// Scores every node: the reference, and what the extender does with the nodes it is sent. How
// full each dataset's nodes are is taken from `nodes`.
GangDecision placeGang(const Gang& gang, const std::vector<NodeInfo>& nodes,
                       const ScoreWeights& weights = {});

// Which nodes a placement over the index (IndexedNodes) scores, so that no decision scans a large
// cluster: every node caching the gang's data, the nodes that fit its workers best (fewest free
// GPUs that suffice, nodes caching no dataset first), and a sample of the rest, as kube-scheduler
// scores a share of the nodes (percentageOfNodesToScore).
struct CandidateOptions {
  // Clusters with fewer nodes are scanned whole. Default 1000.
  size_t scanBelow = 1000;
  // Best-fitting nodes are taken until they have room for this many times the gang's workers...
  int64_t fitSlack = 2;
  // ...or this many were looked at. Default 256.
  int64_t fitVisitLimit = 256;
  // The sample's share of the cluster in percent; 0: kube-scheduler's adaptive default,
  // 50 - nodes/125 and at least 5. Never fewer than minSample nodes (default 100).
  int samplePercent = 0;
  size_t minSample = 100;
};

// How many nodes the sample of a cluster of `nodes` holds (before capping at `nodes`).
size_t sampleSize(size_t nodes, const CandidateOptions& options);

// Places the gang among its candidates; a gang they cannot take is placed by a scan of every
// node. So it places every gang the scan places, with the scan's reasons when it cannot; the
// caching nodes, which decide its locality, are always candidates.
GangDecision placeGang(const Gang& gang, const IndexedNodes& view, const ScoreWeights& weights = {},
                       const CandidateOptions& options = {});

}  // namespace granary::scheduler

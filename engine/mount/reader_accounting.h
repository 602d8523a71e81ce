// Who reads a dataset through its mount, and how long they wait for data. Every read through
// a mount is recorded against its reader: the pod that issued it on Kubernetes (found from the
// calling process's cgroup), the process itself in local mode. "Data wait" is the wall time
// during which at least one of the reader's reads was blocked on chunks that were not on this
// node's disks (core/blocked_time.h): concurrent reads that wait together count once, so it
// never exceeds the time the reader ran. A read that is still blocked counts up to now in
// readers() and waitByPod() (the telemetry, and data-starved time, see a long wait as it goes);
// the wait counter series adds a read's wait when it ends.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "common/clock.h"
#include "common/thread_annotations.h"
#include "engine/cache_metrics.h"
#include "engine/core/blocked_time.h"
#include "engine/dataset_cache.h"

namespace granary::cache {

// The pod UID in a process's /proc/<pid>/cgroup text, under the kubelet's cgroupfs layout
// (".../kubepods/burstable/pod<uid>/<container>") or its systemd layout
// (".../kubepods-burstable-pod<uid with '_'>.slice/..."); "" when the process is not in a pod.
std::string podUidFromCgroup(std::string_view cgroupText);

// The process a FUSE request came from: the kernel names the calling thread.
struct ProcessIdentity {
  int pid = 0;          // the thread group (process) id
  std::string podUid;   // "" when not in a pod
  std::string command;  // the process's name (/proc/<pid>/comm), "" when unknown
};

// From /proc/<tid>/status and /proc/<tid>/cgroup; {tid, ""} when they cannot be read.
ProcessIdentity identifyThread(int tid);

// Whether process `pid` still runs (a zombie counts as gone).
bool processAlive(int pid);

struct ReaderKey {
  std::string dataset;  // "namespace/name"
  std::string podUid;   // empty in local mode
  int pid = 0;          // set when there is no pod

  friend auto operator<=>(const ReaderKey&, const ReaderKey&) = default;
};

struct ReaderTotals {
  ReaderKey key;
  std::string podNamespace, podName;  // when a mount was published for the pod (readers() fills)
  std::string command;                // of the process that first read (see ProcessIdentity)
  std::chrono::nanoseconds wait{0};
  ReadTotals reads;  // bytes by source; chunkMisses counts reads that waited
  int64_t operations = 0;
};

// One read as the mount saw it: bytes by source, how long it blocked on a miss, and when it
// ended (the default: when it is recorded).
struct ReadRecord {
  int64_t localBytes = 0, peerBytes = 0, originBytes = 0;
  std::chrono::nanoseconds wait{0};
  Clock::MonoTime end{};  // the epoch: now
  // Set when the read was announced by beginWait(), with the time given there: it is no
  // longer in flight.
  std::optional<Clock::MonoTime> waitBegan;
};

class ReaderAccounting {
 public:
  // `identify` finds the process and pod of a thread; `metrics` may be null. Times of reads
  // (beginWait, ReadRecord) are on `clock`'s monotonic time.
  explicit ReaderAccounting(CacheMetrics* metrics,
                            std::function<ProcessIdentity(int tid)> identify = identifyThread,
                            Clock& clock = realClock());

  Clock& clock() const { return clock_; }

  // A read by thread `tid` blocks from `start` on a miss; record() ends it (with waitBegan).
  void beginWait(const std::string& dataset, int tid, Clock::MonoTime start);
  // Records a read issued by thread `tid`.
  void record(const std::string& dataset, int tid, const ReadRecord& read);
  // Names a pod (from a CSI publish) so its totals and metrics carry namespace and name.
  void namePod(const std::string& uid, const std::string& ns, const std::string& name);
  std::vector<ReaderTotals> readers() const;
  // Each named pod's data wait ("namespace/name"), its datasets added up.
  std::map<std::string, std::chrono::nanoseconds> waitByPod() const;

  // Readers end, and their totals and series go `grace` later (so that the operator's last
  // telemetry and Prometheus' last scrape see their final figures): the series stay about as
  // many as the readers there are. A pod's reader of `dataset` ends when its volume is
  // unpublished; a reader that reads again is not ended any more.
  static constexpr std::chrono::seconds kEndedGrace{60};
  void endPod(const std::string& dataset, const std::string& podUid);
  // Ends the process readers (no pod: local mode) whose process is gone, then forgets every
  // reader ended `grace` ago or more; returns how many it forgot.
  int sweep(std::chrono::nanoseconds grace = kEndedGrace,
            const std::function<bool(int pid)>& alive = processAlive);

 private:
  struct Series {
    Counter waitSeconds, localBytes, peerBytes, originBytes;
  };
  // The labels that name a reader in its series, as dcgm-exporter and kube-state-metrics name a
  // pod: a named pod's namespace and name; "" and the uid for a pod whose name is not known; ""
  // and "process:<command>" for a process outside any pod (local mode; "pid:<pid>" when its
  // name is unknown), so that the processes of one program, short-lived ones most of all, share
  // their series. Fixed when the reader is first seen, so that its series are removed under the
  // labels they were made with, once the last reader with them goes.
  struct SeriesLabels {
    std::string podNamespace, pod;
  };
  struct Reader {
    ReaderTotals totals;
    SeriesLabels labels;
    std::optional<Clock::MonoTime> endedAt;
    BlockedTime blocked;
    std::multiset<Clock::MonoTime> inFlight;  // blocked reads' starts
    std::optional<Series> series;             // absent without metrics
  };
  struct Lookup {
    ProcessIdentity identity;
    Clock::MonoTime at;
  };
  // The process and pod of a thread, looked up again after a while (thread ids are reused).
  ProcessIdentity identityOf(int tid);
  void forgetLocked(std::map<ReaderKey, Reader>::iterator reader) GRANARY_REQUIRES(mutex_);
  Reader& readerLocked(const std::string& dataset, const ProcessIdentity& identity)
      GRANARY_REQUIRES(mutex_);

  CacheMetrics* metrics_;
  std::function<ProcessIdentity(int)> identify_;
  Clock& clock_;
  mutable Mutex mutex_;
  // Looked up again after a while: ids are reused.
  std::map<int, Lookup> threads_ GRANARY_GUARDED_BY(mutex_);
  // Uid → namespace, name.
  std::map<std::string, std::pair<std::string, std::string>> podNames_ GRANARY_GUARDED_BY(mutex_);
  std::map<ReaderKey, Reader> readers_ GRANARY_GUARDED_BY(mutex_);
  // How many readers use the series of (dataset, namespace, pod).
  std::map<std::tuple<std::string, std::string, std::string>, int> seriesUsers_
      GRANARY_GUARDED_BY(mutex_);
};

}  // namespace granary::cache

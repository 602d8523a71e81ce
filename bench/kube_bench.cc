// The Kubernetes runtime's hot paths, each printed next to a baseline measured in the same run:
//   1. informer events/s: watch lines decoded and applied to an indexed Store, vs only parsing
//      the same JSON (the floor any informer pays);
//   2. memory per cached object for 10,000 pods, vs the size of their JSON text, with whole
//      objects and with a transform that keeps what a scheduler reads;
//   3. work-queue throughput (add → get → done, 4 workers, de-duplication and in-flight
//      tracking), vs a plain mutex-guarded deque with the same workers.
// Usage: kube_bench [objects] (default 10000).
#include <malloc.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/flags.h"
#include "common/kube/store.h"
#include "common/kube/watch_decoder.h"
#include "common/kube/work_queue.h"

namespace {

using namespace granary;
using Steady = std::chrono::steady_clock;

// A pod as a kubelet-less API server returns it: ~1.5 KB of JSON.
std::string podJson(int i, int version) {
  const std::string n = std::to_string(i);
  return R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"worker-)" + n +
         R"(","namespace":"ml","uid":"6f1c6a4e-)" + n + R"(","resourceVersion":")" +
         std::to_string(version) + R"(","labels":{"granary.io/job-name":"resnet-)" +
         std::to_string(i % 100) + R"(","granary.io/rank":")" + n +
         R"("},"ownerReferences":[{"apiVersion":"granary.io/v1alpha1","kind":"TrainingJob","name":"resnet","uid":"job-)" +
         std::to_string(i % 100) + R"(","controller":true}]},"spec":{"nodeName":"gpu-)" +
         std::to_string(i % 500) +
         R"(","schedulerName":"granary-scheduler","containers":[{"name":"trainer","image":"nvcr.io/nvidia/pytorch:24.10-py3","command":["torchrun","--nnodes=4","train.py"],"env":[{"name":"MASTER_ADDR","value":"resnet-worker-0.resnet"},{"name":"MASTER_PORT","value":"29500"},{"name":"WORLD_SIZE","value":"4"},{"name":"RANK","value":")" +
         n +
         R"("}],"resources":{"limits":{"nvidia.com/gpu":"8","memory":"200Gi"}},"volumeMounts":[{"name":"imagenet","mountPath":"/data/imagenet","readOnly":true}]}],"volumes":[{"name":"imagenet","csi":{"driver":"csi.granary.io","readOnly":true,"volumeAttributes":{"dataset":"imagenet"}}}]},"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}],"podIP":"10.0.)" +
         std::to_string(i % 250) + "." + std::to_string(i % 200) + R"("}})";
}

// What a scheduler keeps of a pod: identity, labels, owners, node and resource requests.
kube::Json schedulerView(kube::Json pod) {
  kube::Json kept = kube::Json::object();
  kept["metadata"] = kube::Json::object();
  for (const char* field :
       {"name", "namespace", "uid", "resourceVersion", "labels", "ownerReferences"}) {
    if (pod["metadata"].has_field(field)) kept["metadata"][field] = pod["metadata"][field];
  }
  kept["spec"] = kube::Json::object();
  kept["spec"]["nodeName"] = pod["spec"]["nodeName"];
  kube::Json containers = kube::Json::array();
  size_t i = 0;
  for (auto& container : pod["spec"]["containers"].as_array()) {
    containers[i]["resources"] = container["resources"];
    ++i;
  }
  kept["spec"]["containers"] = containers;
  return kept;
}

double seconds(Steady::duration d) { return std::chrono::duration<double>(d).count(); }

size_t heapInUse() { return mallinfo2().uordblks; }

int runBench(int objects) {
  std::printf("granary kube_bench: %d objects\n\n", objects);

  // 1. Informer events.
  std::string stream;
  for (int v = 0; v < 3; ++v) {
    for (int i = 0; i < objects; ++i) {
      stream += std::string(R"({"type":")") + (v == 0 ? "ADDED" : "MODIFIED") + R"(","object":)" +
                podJson(i, v * objects + i + 1) + "}\n";
    }
  }
  const int events = 3 * objects;

  auto start = Steady::now();
  size_t parsed = 0;
  for (size_t begin = 0; begin < stream.size();) {
    const size_t end = stream.find('\n', begin);
    auto json = web::json::value::parse(stream.substr(begin, end - begin));
    parsed += json.size();
    begin = end + 1;
  }
  const double baselineSeconds = seconds(Steady::now() - start);

  kube::Store store;
  store.addIndex("node", kube::indexPodsByNode());
  store.addIndex("owner", kube::indexByOwnerUid());
  store.addIndex("job", kube::indexByLabel("granary.io/job-name"));
  kube::WatchDecoder decoder;
  std::vector<kube::WatchEvent> decoded;
  start = Steady::now();
  constexpr size_t kChunk = 64 * 1024;  // as the bytes arrive from the network
  for (size_t offset = 0; offset < stream.size(); offset += kChunk) {
    decoded.clear();
    if (!decoder.feed(std::string_view(stream).substr(offset, kChunk), decoded).isOk()) return 1;
    for (auto& event : decoded)
      store.upsert(std::make_shared<const kube::Json>(std::move(event.object)));
  }
  const double informerSeconds = seconds(Steady::now() - start);
  std::printf("informer events (decode + indexed store), %d events\n", events);
  std::printf("  granary   %10.0f events/s\n", events / informerSeconds);
  std::printf("  baseline  %10.0f events/s  (JSON parse only)\n", events / baselineSeconds);
  std::printf("  ratio     %10.2f\n\n", baselineSeconds / informerSeconds);
  if (store.size() != static_cast<size_t>(objects) || parsed == 0) return 1;

  // 2. Memory per cached object.
  size_t textBytes = 0;
  for (int i = 0; i < objects; ++i) textBytes += podJson(i, i + 1).size();
  for (const bool transformed : {false, true}) {
    const size_t before = heapInUse();
    kube::Store cache;
    cache.addIndex("node", kube::indexPodsByNode());
    cache.addIndex("owner", kube::indexByOwnerUid());
    cache.addIndex("job", kube::indexByLabel("granary.io/job-name"));
    for (int i = 0; i < objects; ++i) {
      kube::Json pod = web::json::value::parse(podJson(i, i + 1));
      if (transformed) pod = schedulerView(std::move(pod));
      cache.upsert(std::make_shared<const kube::Json>(std::move(pod)));
    }
    const size_t used = heapInUse() - before;
    std::printf("memory for %d cached pods (3 indexes)%s\n", objects,
                transformed ? ", scheduler transform" : ", whole objects");
    std::printf("  granary   %10.1f MiB  (%zu bytes per object)\n", used / 1048576.0,
                used / objects);
    std::printf("  baseline  %10.1f MiB  (%zu bytes per object of JSON text)\n",
                textBytes / 1048576.0, textBytes / objects);
    std::printf("  ratio     %10.2f\n\n", static_cast<double>(used) / textBytes);
  }

  // 3. Queue throughput.
  constexpr int kWorkers = 4;
  const int items = 50 * objects;
  {
    kube::WorkQueue queue;
    std::atomic<int> done{0};
    start = Steady::now();
    std::vector<std::thread> workers;
    for (int w = 0; w < kWorkers; ++w) {
      workers.emplace_back([&] {
        while (auto item = queue.get()) {
          ++done;
          queue.done(item->key);
        }
      });
    }
    for (int i = 0; i < items; ++i) queue.add("ml/job-" + std::to_string(i));
    queue.shutDownAndWait();
    for (auto& worker : workers) worker.join();
    const double granary = seconds(Steady::now() - start);

    std::mutex mutex;
    std::condition_variable ready;
    std::deque<std::string> plain;
    bool closed = false;
    std::atomic<int> plainDone{0};
    start = Steady::now();
    workers.clear();
    for (int w = 0; w < kWorkers; ++w) {
      workers.emplace_back([&] {
        while (true) {
          std::unique_lock lock(mutex);
          ready.wait(lock, [&] { return !plain.empty() || closed; });
          if (plain.empty()) return;
          std::string key = std::move(plain.front());
          plain.pop_front();
          lock.unlock();
          ++plainDone;
        }
      });
    }
    for (int i = 0; i < items; ++i) {
      std::lock_guard lock(mutex);
      plain.push_back("ml/job-" + std::to_string(i));
      ready.notify_one();
    }
    {
      std::lock_guard lock(mutex);
      closed = true;
      ready.notify_all();
    }
    for (auto& worker : workers) worker.join();
    const double baseline = seconds(Steady::now() - start);
    std::printf("work queue, %d keys, %d workers\n", items, kWorkers);
    std::printf("  granary   %10.0f keys/s  (%d processed)\n", items / granary, done.load());
    std::printf("  baseline  %10.0f keys/s  (mutex + deque, no de-duplication)\n",
                items / baseline);
    std::printf("  ratio     %10.2f\n", baseline / granary);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int objects = 10000;
  CLI::App app(
      "The Kubernetes runtime's informer, cache memory and work queue, each next to "
      "its baseline.",
      "kube_bench");
  app.add_option("objects", objects, "pods to decode, cache and queue")
      ->capture_default_str()
      ->check(CLI::Range(1, 1'000'000));
  if (auto code = granary::parseCommandLine(app, argc, argv)) return *code;
  return runBench(objects);
}

#include "common/api/training_job.h"

#include <algorithm>
#include <set>

namespace granary::api {
namespace {

// The template must be a PodTemplateSpec with at least one named container; the rest of it
// is validated by the API server when the operator creates the workers.
Status checkTemplate(const config::Node& node) {
  const config::Node* spec = node.find("spec");
  const config::Node* containers = spec ? spec->find("containers") : nullptr;
  if (!containers || !containers->isList() || containers->items().empty()) {
    return invalidArgument(node.where() +
                           ".spec.containers: a pod template needs at least one "
                           "container");
  }
  for (const auto& container : containers->items()) {
    const config::Node* name = container.find("name");
    if (!name || !name->isScalar() || !isDnsLabel(name->scalar())) {
      return invalidArgument(container.where() +
                             ".name: every container needs a name (RFC 1123 "
                             "label)");
    }
  }
  return Status::ok();
}

// 1 <= minWorkers <= workers <= maxWorkers; an unset maxWorkers becomes workers.
Status checkElastic(const config::Node& node, int32_t workers, ElasticPolicy& policy) {
  if (policy.maxWorkers == 0) policy.maxWorkers = workers;
  if (policy.minWorkers > workers)
    return invalidArgument(node.where() + ".minWorkers: " + std::to_string(policy.minWorkers) +
                           " is more than spec.workers (" + std::to_string(workers) +
                           "); lower minWorkers or raise workers");
  if (policy.maxWorkers < workers)
    return invalidArgument(node.where() + ".maxWorkers: " + std::to_string(policy.maxWorkers) +
                           " is less than spec.workers (" + std::to_string(workers) +
                           "); raise maxWorkers or lower workers");
  return Status::ok();
}

}  // namespace

Status decodeValue(const config::Node& node, DatasetMount& out) {
  config::Fields f(node);
  f.required("name", out.name, isDnsSubdomain, "the name of a Dataset in the job's namespace");
  f.required(
      "mountPath", out.mountPath,
      [](const std::string& p) { return p.size() > 1 && p.front() == '/' && p.size() <= 1024; },
      "an absolute path other than /");
  f.optional("accessOrderFile", out.accessOrderFile, isPathInsideDataset,
             "a path inside the dataset: relative, without .. (for example order.txt)");
  return f.finish();
}

Status decodeValue(const config::Node& node, CheckpointVolume& out) {
  config::Fields f(node);
  readSource(f, out.source);
  const config::Node* uri = node.find("uri");
  if (uri && !out.source.uri.starts_with("s3://") && !out.source.uri.starts_with("file://") &&
      sourceKindOf(out.source.uri).isOk())
    f.fail(config::expected(*uri, "an s3:// or file:// URI: checkpoints are written to it"));
  f.required(
      "mountPath", out.mountPath,
      [](const std::string& p) { return p.size() > 1 && p.front() == '/' && p.size() <= 1024; },
      "an absolute path other than /");
  f.optional(
      "bandwidthLimit", out.bandwidthLimit,
      [](const std::optional<ByteSize>& s) { return s->bytes > 0; },
      "a rate above zero in bytes per second, such as 200Mi");
  f.optional(
      "copies", out.copies, [](int32_t v) { return v >= 0 && v <= 3; },
      "an integer from 0 (no copies) to 3");
  return f.finish();
}

Status decodeValue(const config::Node& node, ElasticPolicy& out) {
  config::Fields f(node);
  f.required(
      "minWorkers", out.minWorkers, [](int32_t v) { return v >= 1 && v <= 4096; },
      "an integer from 1 to 4096, at most spec.workers");
  out.maxWorkers = 0;  // unset: the spec's workers
  f.optional(
      "maxWorkers", out.maxWorkers, [](int32_t v) { return v >= 1 && v <= 4096; },
      "an integer from 1 to 4096, at least spec.workers");
  return f.finish();
}

Status decodeValue(const config::Node& node, WarmStart& out) {
  return config::decodeEnum(node, out,
                            {{"Parallel", WarmStart::kParallel},
                             {"BeforeStart", WarmStart::kBeforeStart},
                             {"None", WarmStart::kNone}});
}

Status decodeValue(const config::Node& node, Locality& out) {
  return config::decodeEnum(
      node, out, {{"Preferred", Locality::kPreferred}, {"Required", Locality::kRequired}});
}

Status decodeValue(const config::Node& node, CleanPodPolicy& out) {
  return config::decodeEnum(node, out,
                            {{"All", CleanPodPolicy::kAll},
                             {"Running", CleanPodPolicy::kRunning},
                             {"None", CleanPodPolicy::kNone}});
}

Status decodeValue(const config::Node& node, RestartPolicy& out) {
  return config::decodeEnum(node, out,
                            {{"OnFailure", RestartPolicy::kOnFailure},
                             {"ExitCode", RestartPolicy::kExitCode},
                             {"Never", RestartPolicy::kNever}});
}

Status decodeValue(const config::Node& node, Scheduling& out) {
  config::Fields f(node);
  f.optional("locality", out.locality);
  f.optional("schedulerName", out.schedulerName, isDnsSubdomain, "a scheduler name");
  f.optional("priorityClassName", out.priorityClassName, isDnsSubdomain, "a PriorityClass name");
  return f.finish();
}

Status decodeValue(const config::Node& node, RunPolicy& out) {
  config::Fields f(node);
  f.optional(
      "backoffLimit", out.backoffLimit, [](int32_t v) { return v >= 0 && v <= 100; },
      "an integer from 0 to 100");
  f.optional(
      "activeDeadlineSeconds", out.activeDeadlineSeconds,
      [](const std::optional<int64_t>& v) { return *v >= 1; }, "an integer >= 1");
  f.optional(
      "startDeadlineSeconds", out.startDeadlineSeconds, [](int64_t v) { return v >= 1; },
      "an integer >= 1");
  f.optional(
      "ttlSecondsAfterFinished", out.ttlSecondsAfterFinished,
      [](const std::optional<int64_t>& v) { return *v >= 0; }, "an integer >= 0");
  f.optional("cleanPodPolicy", out.cleanPodPolicy);
  f.optional("restartPolicy", out.restartPolicy);
  return f.finish();
}

Status decodeValue(const config::Node& node, TrainingJobSpec& out) {
  config::Fields f(node);
  const config::Node* datasets = f.optional(
      "datasets", out.datasets, [](const std::vector<DatasetMount>& d) { return d.size() <= 16; },
      "at most 16 datasets");
  const config::Node* checkpoints = f.optional("checkpoints", out.checkpoints);
  f.optional(
      "workers", out.workers, [](int32_t w) { return w >= 1 && w <= 4096; },
      "an integer from 1 to 4096");
  if (const config::Node* elastic = f.optional("elastic", out.elastic); elastic && out.elastic)
    f.fail(checkElastic(*elastic, out.workers, *out.elastic));
  f.optional(
      "gpusPerWorker", out.gpusPerWorker, [](int32_t g) { return g >= 0 && g <= 64; },
      "an integer from 0 to 64");
  f.optional(
      "masterPort", out.masterPort, [](int32_t p) { return p >= 1 && p <= 65535; },
      "a port from 1 to 65535");
  if (f.required("template", out.template_)) f.fail(checkTemplate(out.template_));
  f.optional("warmPolicy", out.warmPolicy);
  f.optional("scheduling", out.scheduling);
  f.optional("runPolicy", out.runPolicy);
  f.optional("suspend", out.suspend);

  std::set<std::string> names, paths;
  for (size_t i = 0; datasets && i < out.datasets.size(); ++i) {
    const auto& d = out.datasets[i];
    if (!names.insert(d.name).second) {
      f.fail(config::expected(datasets->items()[i], "each dataset listed once"));
    }
    if (!paths.insert(d.mountPath).second) {
      f.fail(config::expected(datasets->items()[i], "a mountPath not used by another dataset"));
    }
  }
  if (checkpoints && out.checkpoints) {
    const std::string& path = out.checkpoints->mountPath;
    const auto nested = [](const std::string& a, const std::string& b) {
      return a == b || (a.starts_with(b) && (b.back() == '/' || a[b.size()] == '/'));
    };
    for (const auto& d : out.datasets)
      if (nested(path, d.mountPath) || nested(d.mountPath, path))
        f.fail(invalidArgument(checkpoints->where() + ".mountPath: " + path + " overlaps dataset " +
                               d.name + "'s mountPath " + d.mountPath +
                               "; give the checkpoints a path of their own, e.g. /checkpoints"));
  }
  if (out.warmPolicy == WarmStart::kBeforeStart && out.datasets.empty()) {
    f.fail(invalidArgument(node.where() + ".warmPolicy: BeforeStart needs at least one dataset"));
  }
  if (out.scheduling.locality == Locality::kRequired && out.datasets.empty()) {
    f.fail(invalidArgument(node.where() +
                           ".scheduling.locality: Required needs at least one dataset"));
  }
  return f.finish();
}

std::string_view warmStartName(WarmStart policy) {
  switch (policy) {
    case WarmStart::kParallel:
      return "Parallel";
    case WarmStart::kBeforeStart:
      return "BeforeStart";
    case WarmStart::kNone:
      return "None";
  }
  return "Parallel";
}

bool isPathInsideDataset(const std::string& path) {
  if (path.empty() || path.size() > 1024 || path.front() == '/') return false;
  for (size_t start = 0; start <= path.size();) {
    const size_t end = std::min(path.find('/', start), path.size());
    if (path.compare(start, end - start, "..") == 0) return false;
    start = end + 1;
  }
  return true;
}

std::string workerName(const std::string& job, int rank) {
  return job + "-worker-" + std::to_string(rank);
}

std::vector<std::pair<std::string, std::string>> workerEnvironment(const TrainingJobSpec& spec,
                                                                   int rank,
                                                                   const Rendezvous& meet) {
  const std::string perNode = std::to_string(std::max(1, spec.gpusPerWorker));
  if (spec.elastic) {
    return {{"PET_NNODES", std::to_string(spec.elastic->minWorkers) + ":" +
                               std::to_string(spec.elastic->maxWorkers)},
            {"PET_NPROC_PER_NODE", perNode},
            {"PET_RDZV_BACKEND", "c10d"},
            {"PET_RDZV_ENDPOINT", meet.endpoint},
            {"PET_RDZV_ID", meet.id},
            {"PET_RDZV_CONF", "is_host=false,last_call_timeout=5"},
            {"PET_MAX_RESTARTS", std::to_string(spec.runPolicy.backoffLimit)},
            {"PET_MONITOR_INTERVAL", "1"},
            {"PYTHONUNBUFFERED", "1"}};
  }
  const std::string port = std::to_string(meet.masterPort);
  const std::string workers = std::to_string(spec.workers);
  const std::string rankText = std::to_string(rank);
  return {{"MASTER_ADDR", meet.masterAddress},
          {"MASTER_PORT", port},
          {"WORLD_SIZE", workers},
          {"RANK", rankText},
          {"PET_NNODES", workers},
          {"PET_NPROC_PER_NODE", perNode},
          {"PET_NODE_RANK", rankText},
          {"PET_MASTER_ADDR", meet.masterAddress},
          {"PET_MASTER_PORT", port},
          {"PYTHONUNBUFFERED", "1"}};
}

std::vector<std::string> rendezvousStoreCommand(int32_t port, int32_t noticePort) {
  // TCPStore's server listens on every interface; its own client connects over loopback. Torch's
  // c10d rendezvous keeps its state under "torch.rendezvous.<id>": an agent gone is let go by
  // ageing its heartbeat there (a compare-and-set, so that no agent's write is lost), as the
  // keep-alive would once it lapsed. A notice agent matches by its address's first label, its
  // process id, or both. A store that cannot read the state (another torch) changes nothing.
  static constexpr const char* kStore =
      R"py(import base64, datetime, hmac, os, pickle, sys, threading, time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from torch.distributed import TCPStore
store = TCPStore("127.0.0.1", int(sys.argv[1]), is_master=True, wait_for_workers=False,
                 timeout=timedelta(seconds=300))
print("rendezvous store listening on port", sys.argv[1], flush=True)
notices, lock = [], threading.Lock()  # (rendezvous id, host, pid, received)
token = os.environ.get("GRANARY_RENDEZVOUS_TOKEN", "")
if not token:
    print("rendezvous: no GRANARY_RENDEZVOUS_TOKEN: every notice is refused", flush=True)
counts = {"taken": 0, "token": 0, "unreadable": 0}
def parse(text):
    rid, agents = None, []
    for line in text.splitlines():
        words = line.split()
        if len(words) == 2 and words[0] == "rendezvous":
            rid = words[1]
        elif words and len(words) % 2 == 0 and set(words[::2]) <= {"host", "pid"}:
            agent = dict(zip(words[::2], words[1::2]))
            agents.append({"host": agent.get("host"),
                           "pid": int(agent["pid"]) if "pid" in agent else None})
        elif words:
            raise ValueError("unexpected line " + repr(line))
    if not rid or not agents:
        raise ValueError("a notice names the rendezvous, then a line per agent: host, pid or both")
    return rid, agents
def refuse(handler, code, reason, why):
    with lock:
        counts[reason] += 1
        refused = counts["token"] + counts["unreadable"]
    print("rendezvous: refused a notice (" + why + "); refused so far:", refused, flush=True)
    handler.send_error(code, why)
class Notices(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        given = self.headers.get("Authorization", "").encode()
        if not token or not hmac.compare_digest(given, ("Bearer " + token).encode()):
            refuse(self, 403, "token", "a notice needs its job's token: Authorization: Bearer")
            return
        try:
            if self.path != "/gone":
                raise ValueError("POST /gone")
            rid, agents = parse(body.decode())
        except Exception as e:
            refuse(self, 400, "unreadable", str(e))
            return
        received = datetime.datetime.utcnow()
        with lock:
            notices.extend((rid, a["host"], a["pid"], received) for a in agents)
            counts["taken"] += 1
        print("rendezvous: told", len(agents), "agent(s) gone", flush=True)
        self.send_response(204)
        self.end_headers()
    def do_GET(self):
        if self.path != "/metrics":
            self.send_error(404, "GET /metrics")
            return
        with lock:
            c = dict(counts)
        text = ("# HELP granary_rendezvous_notices_total Notices of agents gone the store took.\n"
                "# TYPE granary_rendezvous_notices_total counter\n"
                "granary_rendezvous_notices_total %d\n"
                "# HELP granary_rendezvous_notices_refused_total Notices refused; they changed nothing.\n"
                "# TYPE granary_rendezvous_notices_refused_total counter\n"
                "granary_rendezvous_notices_refused_total{reason=\"token\"} %d\n"
                "granary_rendezvous_notices_refused_total{reason=\"unreadable\"} %d\n"
                % (c["taken"], c["token"], c["unreadable"])).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(text)))
        self.end_headers()
        self.wfile.write(text)
    def log_message(self, *args):
        pass
server = ThreadingHTTPServer(("", int(sys.argv[2])), Notices)
threading.Thread(target=server.serve_forever, daemon=True).start()
store.set_timeout(timedelta(seconds=1))
epoch = datetime.datetime(1970, 1, 1)
def named(node, beat, host, pid, received):
    return (beat > epoch and beat < received and (host is None or node.fqdn.split(".")[0] == host)
            and (pid is None or node.pid == pid))
while True:
    time.sleep(0.2)
    with lock:
        now = datetime.datetime.utcnow()
        notices[:] = [n for n in notices if now - n[3] < timedelta(seconds=60)]
        pending = list(notices)
    for rid in {n[0] for n in pending}:
        key = "torch.rendezvous." + rid
        try:
            raw = store.get(key)
            state = pickle.loads(base64.b64decode(raw))
            gone = [node for node, beat in state.last_heartbeats.items()
                    if any(named(node, beat, *n[1:]) for n in pending if n[0] == rid)]
            if not gone:
                continue
            for node in gone:
                state.last_heartbeats[node] = epoch
            aged = base64.b64encode(pickle.dumps(state))
            if store.compare_set(key, raw, aged) == aged:
                print("rendezvous: let go at once:", ", ".join(str(n) for n in gone), flush=True)
        except Exception:
            pass  # no state under the key yet (the get timed out), or one this store cannot read
)py";
  return {"python3", "-c", kStore, std::to_string(port), std::to_string(noticePort)};
}

std::string rendezvousNotice(const std::string& rendezvousId, const std::vector<GoneAgent>& gone) {
  std::string notice = "rendezvous " + rendezvousId + "\n";
  for (const GoneAgent& agent : gone) {
    std::string line;
    if (!agent.host.empty()) line += "host " + agent.host;
    if (agent.pid > 0) line += (line.empty() ? "pid " : " pid ") + std::to_string(agent.pid);
    if (!line.empty()) notice += line + "\n";
  }
  return notice;
}

}  // namespace granary::api

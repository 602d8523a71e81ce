#include "scheduler/extender.h"

#include <civetweb.h>

#include <cmath>
#include <map>

#include "common/cluster/kube_model.h"
#include "common/cluster/node_checks.h"

namespace granary::scheduler {
namespace {

using kube::Json;

// The nodes named by the request: from "NodeNames" (our cache) or "Nodes.items" (given, with
// what our cache knows is requested on them).
struct Candidates {
  bool byName = false;
  std::vector<NodeInfo> nodes;
  std::vector<Json> objects;                   // for "Nodes" requests, the node objects as given
  std::map<std::string, std::string> unknown;  // name → reason
};

Candidates candidatesOf(const Json& args, const ClusterState& state) {
  Candidates c;
  std::map<std::string, NodeInfo> known;
  state.read([&](const std::vector<NodeInfo>& nodes) {
    for (const auto& n : nodes) known.emplace(n.name, n);
  });
  if (args.has_array_field("NodeNames")) {
    c.byName = true;
    for (const auto& name : args.at("NodeNames").as_array()) {
      if (!name.is_string()) continue;
      const auto it = known.find(name.as_string());
      if (it == known.end()) {
        c.unknown[name.as_string()] = "node is not in granary-scheduler's cache yet";
      } else {
        c.nodes.push_back(it->second);
      }
    }
  } else if (args.has_object_field("Nodes") && args.at("Nodes").has_array_field("items")) {
    for (const auto& item : args.at("Nodes").at("items").as_array()) {
      NodeInfo node = cluster::nodeInfoFrom(item);
      if (const auto it = known.find(node.name); it != known.end()) {
        node.requested = it->second.requested;
        node.cachedDatasets = it->second.cachedDatasets;
      }
      c.nodes.push_back(std::move(node));
      c.objects.push_back(item);
    }
  }
  return c;
}

}  // namespace

Json Extender::filter(const Json& args) const {
  Json result = Json::object();
  result["Nodes"] = Json::null();
  result["NodeNames"] = Json::null();
  result["FailedNodes"] = Json::object();
  result["FailedAndUnresolvableNodes"] = Json::object();
  result["Error"] = Json::string("");
  if (!args.is_object() || !args.has_object_field("Pod")) {
    result["Error"] = Json::string("the request has no Pod");
    return result;
  }
  auto pod = cluster::podInfoFrom(args.at("Pod"));
  if (!pod.isOk()) {
    result["Error"] = Json::string(pod.status().message());
    return result;
  }
  const PodData data = lookup_(args.at("Pod"));
  const DataLocality locality(data.datasets);
  const Candidates c = candidatesOf(args, state_);
  Json passing = Json::array();
  size_t count = 0;
  for (size_t i = 0; i < c.nodes.size(); ++i) {
    const NodeInfo& node = c.nodes[i];
    std::string reason = checkStatic(node, *pod);
    bool unresolvable = !reason.empty();  // preemption cannot fix taints, selectors or readiness
    if (reason.empty() && data.locality == api::Locality::kRequired &&
        locality.at(node.name) <= 0) {
      reason = "node does not cache the job's datasets (locality Required)";
      unresolvable = true;
    }
    if (reason.empty()) reason = checkResources(node, *pod);
    if (!reason.empty()) {
      result[unresolvable ? "FailedAndUnresolvableNodes" : "FailedNodes"][node.name] =
          Json::string(reason);
      continue;
    }
    passing[count++] = c.byName ? Json::string(node.name) : c.objects[i];
  }
  for (const auto& [name, reason] : c.unknown) result["FailedNodes"][name] = Json::string(reason);
  if (c.byName) {
    result["NodeNames"] = passing;
  } else {
    result["Nodes"] = Json::object();
    result["Nodes"]["items"] = passing;
  }
  return result;
}

Json Extender::prioritize(const Json& args) const {
  Json result = Json::array();
  if (!args.is_object() || !args.has_object_field("Pod")) return result;
  const PodData data = lookup_(args.at("Pod"));
  const Candidates c = candidatesOf(args, state_);
  const DataLocality locality(data.datasets);
  double best = 0;
  for (const auto& node : c.nodes) best = std::max(best, locality.at(node.name));
  size_t i = 0;
  for (const auto& node : c.nodes) {
    const double relative = best > 0 ? locality.at(node.name) / best : 0;
    result[i]["Host"] = Json::string(node.name);
    result[i]["Score"] =
        Json::number(static_cast<int>(std::lround(relative * 10)));  // MaxExtenderPriority
    ++i;
  }
  return result;
}

namespace {

int handle(mg_connection* conn, void* data) {
  const auto& extender = *static_cast<const Extender*>(data);
  const mg_request_info* request = mg_get_request_info(conn);
  const std::string path = request->local_uri ? request->local_uri : "";
  const auto endsWith = [&](const std::string& suffix) {
    return path.size() >= suffix.size() &&
           path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  std::string body;
  char buffer[16384];
  for (int n; (n = mg_read(conn, buffer, sizeof buffer)) > 0;)
    body.append(buffer, static_cast<size_t>(n));
  int status = 200;
  Json response;
  Json args;
  try {
    args = Json::parse(body);
  } catch (const std::exception&) {
    args = Json::null();
  }
  if (std::string(request->request_method) != "POST") {
    status = 405;
    response = Json::string("use POST");
  } else if (endsWith("/filter")) {
    response = extender.filter(args);
  } else if (endsWith("/prioritize")) {
    response = extender.prioritize(args);
  } else {
    status = 404;
    response = Json::string("unknown verb; use <prefix>/filter or <prefix>/prioritize");
  }
  const std::string text = response.serialize();
  mg_printf(conn,
            "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: "
            "%zu\r\nConnection: close\r\n\r\n",
            status, mg_get_response_code_text(nullptr, status), text.size());
  mg_write(conn, text.data(), text.size());
  return status;
}

}  // namespace

Result<std::unique_ptr<ExtenderServer>> ExtenderServer::start(const std::string& address,
                                                              const Extender& extender) {
  std::unique_ptr<ExtenderServer> server(new ExtenderServer());
  mg_init_library(0);
  const char* options[] = {
      "listening_ports", address.c_str(), "num_threads", "8", "enable_keep_alive", "no", nullptr};
  mg_callbacks callbacks{};
  callbacks.log_message = [](const mg_connection*, const char*) { return 1; };
  server->context_ = mg_start(&callbacks, nullptr, options);
  if (!server->context_) return unavailable("extender: cannot listen on " + address);
  mg_set_request_handler(server->context_, "/", handle, const_cast<Extender*>(&extender));
  mg_server_port ports[1];
  if (mg_get_server_ports(server->context_, 1, ports) < 1)
    return internalError("extender: no port bound");
  server->port_ = ports[0].port;
  return server;
}

ExtenderServer::~ExtenderServer() {
  if (context_) mg_stop(context_);
}

}  // namespace granary::scheduler

#include "tests/support/api_server_double.h"

#include <civetweb.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "common/config.h"
#include "common/kube/label_selector.h"
#include "common/kube/merge_patch.h"
#include "common/kube/resource.h"
#include "common/kube/yaml_json.h"
#include "common/log.h"
#include "common/url.h"
#include "tests/support/api_server_rules.h"
#include "tests/support/tls_proxy.h"

namespace granary::testing {

using kube::Json;

namespace {

struct TypeInfo {
  kube::ResourceType type;
  bool statusSubresource = false;
  Json schema;  // openAPIV3Schema, for defaults (custom resources only)
};

struct Event {
  uint64_t rv = 0;
  std::string typeKey;
  std::string type;  // ADDED, MODIFIED, DELETED
  Json object;
};

struct Request {
  std::string method;
  std::string path;
  std::map<std::string, std::string> query;
  std::string contentType;
  std::string body;
};

struct Response {
  int status = 200;
  Json body;
};

std::string typeKeyOf(const kube::ResourceType& t) {
  return t.group + "/" + t.version + "/" + t.plural;
}

std::map<std::string, std::string> parseQuery(const char* query) {
  std::map<std::string, std::string> out;
  if (!query) return out;
  std::string_view rest(query);
  while (!rest.empty()) {
    const size_t amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    const size_t eq = pair.find('=');
    out[percentDecode(pair.substr(0, eq), true)] =
        eq == std::string_view::npos ? "" : percentDecode(pair.substr(eq + 1), true);
    if (amp == std::string_view::npos) break;
    rest.remove_prefix(amp + 1);
  }
  return out;
}

Json statusBody(int code, const std::string& reason, const std::string& message) {
  Json s = Json::object();
  s["kind"] = Json::string("Status");
  s["apiVersion"] = Json::string("v1");
  s["status"] = Json::string(code < 400 ? "Success" : "Failure");
  s["code"] = Json::number(code);
  s["reason"] = Json::string(reason);
  s["message"] = Json::string(message);
  s["metadata"] = Json::object();
  return s;
}

Response fail(int code, const std::string& reason, const std::string& message) {
  return {code, statusBody(code, reason, message)};
}

std::string nowTimestamp() { return kube::metav1Time(std::chrono::system_clock::now()); }

// "a, b" or "[a, b]" as the server lists problems.
std::string listed(const std::vector<std::string>& problems) {
  std::string text;
  for (const auto& p : problems) text += (text.empty() ? "" : ", ") + p;
  return problems.size() == 1 ? text : "[" + text + "]";
}

// 422 Invalid, as the server words it: `Pod "x" is invalid: [...]`.
Response invalidObject(const std::string& kind, const Json& object,
                       const std::vector<std::string>& problems) {
  return fail(422, "Invalid",
              kind + " \"" + kube::nameOf(object) + "\" is invalid: " + listed(problems));
}

// Unknown fields removed from a write: refused under fieldValidation=Strict (400, as
// `kubectl` sees it), dropped otherwise.
std::optional<Response> refuseUnknown(const std::vector<std::string>& removed, bool strict) {
  if (removed.empty() || !strict) return std::nullopt;
  std::string text;
  for (const auto& path : removed)
    text += (text.empty() ? "" : ", ") + ("unknown field \"" + path + "\"");
  return fail(400, "BadRequest", "strict decoding error: " + text);
}

bool terminating(const Json& object) {
  return object.has_object_field("metadata") &&
         object.at("metadata").has_field("deletionTimestamp");
}

// Applies openAPIV3Schema defaults, as the API server does on every write.
void applyDefaults(Json& value, const Json& schema) {
  if (!schema.is_object()) return;
  if (value.is_object() && schema.has_object_field("properties")) {
    for (const auto& [name, prop] : schema.at("properties").as_object()) {
      if (!value.has_field(name) && prop.has_field("default")) value[name] = prop.at("default");
      if (value.has_field(name)) applyDefaults(value[name], prop);
    }
  } else if (value.is_array() && schema.has_object_field("items")) {
    for (auto& item : value.as_array()) applyDefaults(item, schema.at("items"));
  }
}

Json withoutField(Json object, const char* field) {
  kube::eraseField(object, field);
  return object;
}

bool labelsMatch(const Json& object, const kube::LabelSelector& labels,
                 const kube::LabelSelector& fields) {
  if (!labels.matches(kube::stringMap(object))) return false;
  if (fields.empty()) return true;
  std::map<std::string, std::string> values;
  for (const auto& r : fields.requirements()) {
    const Json v = kube::pathValue(object, r.key);
    values[r.key] = v.is_string() ? v.as_string() : (v.is_null() ? "" : v.serialize());
  }
  return fields.matches(values);
}

}  // namespace

struct ApiServerDouble::State {
  ApiServerDoubleOptions options;
  mg_context* context = nullptr;
  int port = 0;
  std::unique_ptr<TlsProxy> tls;  // set when serving HTTPS

  mutable std::mutex mutex;  // guards everything below
  std::condition_variable changed;
  std::map<std::string, TypeInfo> types;                       // typeKey -> info
  std::map<std::string, std::map<std::string, Json>> objects;  // typeKey -> key -> object
  uint64_t rv = 1;
  std::deque<Event> history;  // history[i].rv == firstRetained + i
  uint64_t firstRetained = 2;
  uint64_t dropGeneration = 0;
  bool stopping = false;
  bool refuseWatches = false;
  int garbleCount = 0;
  int failCount = 0;
  int failStatus = 500;
  int failRetryAfter = -1;
  std::chrono::milliseconds latency{0};
  std::atomic<int> watches{0};
  std::atomic<int64_t> watchesStarted{0};
  std::atomic<int64_t> requests{0};
  std::mt19937_64 random{42};
  bool strict = false;  // the request being handled asked for fieldValidation=Strict
  bool dryRun = false;  // ... and for dryRun=All (creates only: checked, not stored)

  void addBuiltinTypes() {
    using Builtin = std::pair<const kube::ResourceType*, bool>;  // type, status subresource
    for (const Builtin& builtin :
         {Builtin{&kube::resources::pods(), true}, Builtin{&kube::resources::nodes(), true},
          Builtin{&kube::resources::services(), true}, Builtin{&kube::resources::events(), false},
          Builtin{&kube::resources::secrets(), false},
          Builtin{&kube::resources::namespaces(), true}, Builtin{&kube::resources::leases(), false},
          Builtin{&kube::resources::customResourceDefinitions(), true}}) {
      types[typeKeyOf(*builtin.first)] = TypeInfo{*builtin.first, builtin.second, Json::null()};
    }
    types["/v1/configmaps"] =
        TypeInfo{{"", "v1", "configmaps", "ConfigMap", true}, false, Json::null()};
    types[kServiceAccounts] =
        TypeInfo{{"", "v1", "serviceaccounts", "ServiceAccount", true}, false, Json::null()};
    for (const char* ns : {"default", "kube-system", "kube-public", "kube-node-lease"}) {
      Json object = Json::object();
      object["apiVersion"] = Json::string("v1");
      object["kind"] = Json::string("Namespace");
      object["metadata"] = Json::object();
      object["metadata"]["name"] = Json::string(ns);
      store(typeKeyOf(kube::resources::namespaces()), ns, std::move(object), "ADDED");
      addDefaultServiceAccount(ns);
    }
  }

  static constexpr const char* kServiceAccounts = "/v1/serviceaccounts";

  // The ServiceAccount "default" of a new namespace (the service-account controller's). Lock held.
  void addDefaultServiceAccount(const std::string& ns) {
    Json account = Json::object();
    account["apiVersion"] = Json::string("v1");
    account["kind"] = Json::string("ServiceAccount");
    account["metadata"] = Json::object();
    account["metadata"]["name"] = Json::string("default");
    account["metadata"]["namespace"] = Json::string(ns);
    account["metadata"]["uid"] = Json::string("sa-" + ns);
    account["metadata"]["creationTimestamp"] = Json::string(nowTimestamp());
    store(kServiceAccounts, kube::objectKey(ns, "default"), std::move(account), "ADDED");
  }

  // A terminating namespace goes once nothing is left in it (the namespace controller's).
  // Lock held.
  void finishNamespace(const std::string& ns) {
    const std::string namespaces = typeKeyOf(kube::resources::namespaces());
    const auto it = objects[namespaces].find(ns);
    if (it == objects[namespaces].end() || !terminating(it->second)) return;
    for (const auto& [typeKey, bucket] : objects)
      for (const auto& [key, object] : bucket)
        if (types[typeKey].type.namespaced && kube::namespaceOf(object) == ns) return;
    store(namespaces, ns, it->second, "DELETED");
  }

  // Records a write: bumps the resourceVersion, stamps it, keeps the event. Lock held.
  Json store(const std::string& typeKey, const std::string& key, Json object,
             const char* eventType) {
    ++rv;
    object["metadata"]["resourceVersion"] = Json::string(std::to_string(rv));
    if (std::strcmp(eventType, "DELETED") == 0) {
      objects[typeKey].erase(key);
    } else {
      objects[typeKey][key] = object;
    }
    history.push_back(Event{rv, typeKey, eventType, object});
    while (history.size() > options.historyLimit) {
      history.pop_front();
      ++firstRetained;
    }
    changed.notify_all();
    return object;
  }

  Status registerCrd(const Json& crd) {
    try {
      const auto& spec = crd.at("spec");
      const auto& names = spec.at("names");
      for (const auto& version : spec.at("versions").as_array()) {
        TypeInfo info;
        info.type = {spec.at("group").as_string(), version.at("name").as_string(),
                     names.at("plural").as_string(), names.at("kind").as_string(),
                     spec.at("scope").as_string() == "Namespaced"};
        info.statusSubresource = version.has_object_field("subresources") &&
                                 version.at("subresources").has_field("status");
        if (version.has_object_field("schema"))
          info.schema = version.at("schema").at("openAPIV3Schema");
        types[typeKeyOf(info.type)] = info;
      }
    } catch (const std::exception& e) {
      return invalidArgument(std::string("CRD is malformed: ") + e.what());
    }
    return Status::ok();
  }

  // Resolves a path to its type, namespace, name and subresource.
  struct Target {
    const TypeInfo* info = nullptr;
    std::string ns, name, subresource;
  };

  Result<Target> resolve(const std::string& path) {
    std::vector<std::string> parts;
    size_t start = 1;
    while (start <= path.size()) {
      const size_t slash = path.find('/', start);
      parts.push_back(path.substr(start, slash - start));
      if (slash == std::string::npos) break;
      start = slash + 1;
    }
    std::string group, version;
    size_t i = 0;
    if (parts.size() >= 2 && parts[0] == "api") {
      version = parts[1];
      i = 2;
    } else if (parts.size() >= 3 && parts[0] == "apis") {
      group = parts[1];
      version = parts[2];
      i = 3;
    } else {
      return notFound("the server could not find the requested resource");
    }
    Target target;
    if (parts.size() >= i + 3 && parts[i] == "namespaces") {
      target.ns = parts[i + 1];
      i += 2;
    }
    if (i >= parts.size()) return notFound("the server could not find the requested resource");
    const std::string plural = parts[i];
    if (i + 1 < parts.size()) target.name = parts[i + 1];
    if (i + 2 < parts.size()) target.subresource = parts[i + 2];
    const auto it = types.find(group + "/" + version + "/" + plural);
    if (it == types.end()) return notFound("the server could not find the requested resource");
    target.info = &it->second;
    return target;
  }

  Response handle(const Request& request) {
    std::unique_lock lock(mutex);
    auto target = resolve(request.path);
    if (!target.isOk()) return fail(404, "NotFound", target.status().message());
    const TypeInfo& info = *target->info;
    const std::string typeKey = typeKeyOf(info.type);
    const std::string key = kube::objectKey(info.type.namespaced ? target->ns : "", target->name);
    const std::string what = info.type.plural + " \"" + target->name + "\"";

    Json body;
    if (!request.body.empty()) {
      try {
        body = Json::parse(request.body);
      } catch (const std::exception&) {
        return fail(400, "BadRequest", "the request body is not JSON");
      }
    }
    const std::string& m = request.method;
    const auto validation = request.query.find("fieldValidation");
    strict = validation != request.query.end() && validation->second == "Strict";
    const auto dry = request.query.find("dryRun");
    dryRun = dry != request.query.end() && dry->second == "All";
    if (m == "GET" && target->name.empty()) return list(info, target->ns, request.query);
    if (m == "GET") {
      const auto& bucket = objects[typeKey];
      const auto it = bucket.find(key);
      if (it == bucket.end()) return fail(404, "NotFound", what + " not found");
      return {200, it->second};
    }
    if (m == "POST" && target->subresource == "binding") return bind(*target, body);
    if (m == "POST") return create(info, target->ns, std::move(body));
    if (m == "PUT") return update(info, key, std::move(body), target->subresource);
    if (m == "PATCH") return patch(info, *target, key, std::move(body), request);
    if (m == "DELETE") return remove(info, key, body);
    return fail(405, "MethodNotAllowed", m + " is not supported");
  }

  Response list(const TypeInfo& info, const std::string& ns,
                const std::map<std::string, std::string>& query) {
    auto labels =
        kube::LabelSelector::parse(query.count("labelSelector") ? query.at("labelSelector") : "");
    auto fields = kube::LabelSelector::parseFields(
        query.count("fieldSelector") ? query.at("fieldSelector") : "");
    if (!labels.isOk()) return fail(400, "BadRequest", labels.status().message());
    if (!fields.isOk()) return fail(400, "BadRequest", fields.status().message());
    const size_t limit = query.count("limit") ? std::stoul(query.at("limit")) : 0;
    const std::string after = query.count("continue") ? query.at("continue") : "";
    Json items = Json::array();
    size_t count = 0;
    std::string next;
    const auto& bucket = objects[typeKeyOf(info.type)];
    for (auto it = after.empty() ? bucket.begin() : bucket.upper_bound(after); it != bucket.end();
         ++it) {
      if (!ns.empty() && info.type.namespaced && kube::namespaceOf(it->second) != ns) continue;
      if (!labelsMatch(it->second, *labels, *fields)) continue;
      if (limit && count == limit) {
        next = items.as_array().size() ? kube::objectKey(items[count - 1]) : "";
        break;
      }
      items[count++] = withoutField(withoutField(it->second, "kind"), "apiVersion");
    }
    Json out = Json::object();
    out["kind"] = Json::string(info.type.kind + "List");
    out["apiVersion"] = Json::string(info.type.apiVersion());
    out["metadata"] = Json::object();
    out["metadata"]["resourceVersion"] = Json::string(std::to_string(rv));
    if (!next.empty()) out["metadata"]["continue"] = Json::string(next);
    out["items"] = items;
    return {200, out};
  }

  Response create(const TypeInfo& info, const std::string& ns, Json object) {
    if (!object.is_object()) return fail(400, "BadRequest", "the body must be an object");
    if (!object.has_object_field("metadata")) object["metadata"] = Json::object();
    auto& metadata = object["metadata"];
    if (!metadata.has_string_field("name") || metadata.at("name").as_string().empty()) {
      if (!metadata.has_string_field("generateName")) {
        return fail(422, "Invalid",
                    "metadata.name: Required value: name or generateName is required");
      }
      static const char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
      std::string suffix;
      for (int i = 0; i < 5; ++i) suffix += kAlphabet[random() % (sizeof kAlphabet - 1)];
      metadata["name"] = Json::string(metadata.at("generateName").as_string() + suffix);
    }
    const std::string name = metadata.at("name").as_string();
    if (info.type.namespaced) {
      if (ns.empty()) return fail(400, "BadRequest", "a namespace is required");
      if (metadata.has_string_field("namespace") && metadata.at("namespace").as_string() != ns) {
        return fail(400, "BadRequest", "the namespace of the object does not match the request");
      }
      metadata["namespace"] = Json::string(ns);
      const auto& namespaces = objects[typeKeyOf(kube::resources::namespaces())];
      if (!namespaces.count(ns)) {
        return fail(404, "NotFound", "namespaces \"" + ns + "\" not found");
      }
      if (terminating(namespaces.at(ns))) {
        return fail(403, "Forbidden",
                    info.type.plural + " \"" + name +
                        "\" is forbidden: unable to create new content in namespace " + ns +
                        " because it is being terminated");
      }
    }
    if (auto refused = admit(info, object, std::nullopt)) return *refused;
    const std::string typeKey = typeKeyOf(info.type);
    const std::string key = kube::objectKey(info.type.namespaced ? ns : "", name);
    if (objects[typeKey].count(key)) {
      return fail(409, "AlreadyExists", info.type.plural + " \"" + name + "\" already exists");
    }
    char uid[40];
    std::snprintf(uid, sizeof uid, "%08x-%04x-4%03x-8%03x-%012llx", static_cast<unsigned>(random()),
                  static_cast<unsigned>(random() & 0xffff), static_cast<unsigned>(random() & 0xfff),
                  static_cast<unsigned>(random() & 0xfff),
                  static_cast<unsigned long long>(random() & 0xffffffffffffULL));
    // Admission may have added fields to the object (a Secret's data), moving its metadata.
    Json& admitted = object["metadata"];
    admitted["uid"] = Json::string(uid);
    admitted["creationTimestamp"] = Json::string(nowTimestamp());
    admitted["generation"] = Json::number(1);
    kube::eraseField(admitted, "deletionTimestamp");
    object["kind"] = Json::string(info.type.kind);
    object["apiVersion"] = Json::string(info.type.apiVersion());
    if (!info.schema.is_null()) applyDefaults(object, info.schema);
    if (info.type == kube::resources::nodes()) rules::taintNewNode(object);
    if (dryRun) return {201, object};
    if (info.type == kube::resources::customResourceDefinitions()) {
      if (Status s = registerCrd(object); !s.isOk()) return fail(422, "Invalid", s.message());
    }
    Json created = store(typeKey, key, std::move(object), "ADDED");
    if (info.type == kube::resources::namespaces()) addDefaultServiceAccount(name);
    return {201, created};
  }

  // What the server checks and changes on every write of `object` (with `current` on an
  // update), before it is stored: unknown fields of custom resources and CRDs, names and
  // labels, and pods. A response when the write is refused. Lock held.
  std::optional<Response> admit(const TypeInfo& info, Json& object,
                                const std::optional<Json>& current) {
    if (!info.schema.is_null()) {
      if (auto refused = refuseUnknown(rules::pruneUnknownFields(object, info.schema), strict))
        return refused;
    }
    if (info.type == kube::resources::customResourceDefinitions()) {
      if (auto refused = refuseUnknown(rules::pruneUnknownCrdFields(object), strict))
        return refused;
    }
    if (info.type == kube::resources::secrets()) rules::mergeStringData(object);
    const bool pod = info.type == kube::resources::pods();
    if (pod && !current) {  // admission (defaults, the ServiceAccount) comes before validation
      rules::defaultPod(object);
      const std::string account = kube::pathValue(object, "spec.serviceAccountName").is_string()
                                      ? object.at("spec").at("serviceAccountName").as_string()
                                      : "default";
      const std::string ns = kube::namespaceOf(object);
      if (!objects[kServiceAccounts].count(kube::objectKey(ns, account))) {
        return fail(403, "Forbidden",
                    "pods \"" + kube::nameOf(object) +
                        "\" is forbidden: error looking up service account " + ns + "/" + account +
                        ": serviceaccount \"" + account + "\" not found");
      }
    }
    auto problems = rules::metadataProblems(object, info.type.plural);
    if (pod) {
      for (auto& p :
           current ? rules::podUpdateProblems(*current, object) : rules::podProblems(object))
        problems.push_back(std::move(p));
    }
    if (!problems.empty()) return invalidObject(info.type.kind, object, problems);
    return std::nullopt;
  }

  // Writes `next` over `current` after the checks every update makes. Lock held.
  Response commit(const TypeInfo& info, const std::string& key, const Json& current, Json next) {
    const std::string typeKey = typeKeyOf(info.type);
    // Server-owned metadata cannot be changed by clients.
    for (const char* field :
         {"uid", "creationTimestamp", "generation", "deletionTimestamp", "name", "namespace"}) {
      if (current.at("metadata").has_field(field)) {
        next["metadata"][field] = current.at("metadata").at(field);
      } else if (next.has_object_field("metadata")) {
        kube::eraseField(next["metadata"], field);
      }
    }
    next["kind"] = Json::string(info.type.kind);
    next["apiVersion"] = Json::string(info.type.apiVersion());
    if (auto refused = admit(info, next, current)) return *refused;
    if (!info.schema.is_null()) applyDefaults(next, info.schema);
    if (withoutField(withoutField(next, "metadata"), "status") !=
        withoutField(withoutField(current, "metadata"), "status")) {
      const auto generation = current.at("metadata").has_field("generation")
                                  ? current.at("metadata").at("generation").as_number().to_int64()
                                  : 1;
      next["metadata"]["generation"] = Json::number(generation + 1);
    }
    // An object being deleted goes once its last finalizer is removed.
    const bool finalizing = current.at("metadata").has_field("deletionTimestamp");
    const bool noFinalizers = !next.at("metadata").has_array_field("finalizers") ||
                              next.at("metadata").at("finalizers").as_array().size() == 0;
    if (finalizing && noFinalizers) {
      Json gone = store(typeKey, key, std::move(next), "DELETED");
      if (info.type.namespaced) finishNamespace(kube::namespaceOf(gone));
      return {200, gone};
    }
    if (next == current) return {200, current};
    return {200, store(typeKey, key, std::move(next), "MODIFIED")};
  }

  // The object `next` would become under the status-subresource split.
  static Json split(const TypeInfo& info, const Json& current, Json next,
                    const std::string& subresource) {
    if (subresource == "status") {
      Json result = current;
      if (next.has_field("status"))
        result["status"] = next.at("status");
      else
        kube::eraseField(result, "status");
      if (next.has_object_field("metadata") && next.at("metadata").has_field("resourceVersion")) {
        result["metadata"]["resourceVersion"] = next.at("metadata").at("resourceVersion");
      }
      return result;
    }
    if (info.statusSubresource) {
      if (current.has_field("status"))
        next["status"] = current.at("status");
      else
        kube::eraseField(next, "status");
    }
    return next;
  }

  Response update(const TypeInfo& info, const std::string& key, Json object,
                  const std::string& subresource) {
    if (!object.is_object() || !object.has_object_field("metadata")) {
      return fail(400, "BadRequest", "the body must be an object with metadata");
    }
    if (!subresource.empty() && subresource != "status") {
      return fail(404, "NotFound", "subresource " + subresource + " is not supported");
    }
    const auto& bucket = objects[typeKeyOf(info.type)];
    const auto it = bucket.find(key);
    if (it == bucket.end())
      return fail(404, "NotFound", info.type.plural + " \"" + key + "\" not found");
    const Json current = it->second;
    const std::string wanted = kube::resourceVersionOf(object);
    if (!wanted.empty() && wanted != kube::resourceVersionOf(current)) {
      return fail(409, "Conflict",
                  "Operation cannot be fulfilled on " + info.type.plural + " \"" +
                      kube::nameOf(current) +
                      "\": the object has been modified; please apply your changes to the latest "
                      "version and try again");
    }
    return commit(info, key, current, split(info, current, std::move(object), subresource));
  }

  Response patch(const TypeInfo& info, const Target& target, const std::string& key, Json patchBody,
                 const Request& request) {
    const bool apply = request.contentType.rfind("application/apply-patch+yaml", 0) == 0;
    const bool merge = request.contentType.rfind("application/merge-patch+json", 0) == 0;
    if (!apply && !merge) {
      return fail(415, "UnsupportedMediaType",
                  "content type " + request.contentType + " is not supported");
    }
    if (!patchBody.is_object()) return fail(400, "BadRequest", "the patch must be an object");
    const auto& bucket = objects[typeKeyOf(info.type)];
    const auto it = bucket.find(key);
    if (it == bucket.end()) {
      if (!apply)
        return fail(404, "NotFound", info.type.plural + " \"" + target.name + "\" not found");
      if (!request.query.count("fieldManager")) {
        return fail(400, "BadRequest", "fieldManager is required for apply");
      }
      if (!patchBody.has_object_field("metadata")) patchBody["metadata"] = Json::object();
      patchBody["metadata"]["name"] = Json::string(target.name);
      return create(info, target.ns, std::move(patchBody));
    }
    if (apply && !request.query.count("fieldManager")) {
      return fail(400, "BadRequest", "fieldManager is required for apply");
    }
    const Json current = it->second;
    const std::string wanted = kube::resourceVersionOf(patchBody);
    if (!wanted.empty() && wanted != kube::resourceVersionOf(current)) {
      return fail(409, "Conflict",
                  "the object has been modified; please apply your changes to the "
                  "latest version and try again");
    }
    Json next = kube::applyMergePatch(current, patchBody);
    next["metadata"]["resourceVersion"] = current.at("metadata").at("resourceVersion");
    return commit(info, key, current, split(info, current, std::move(next), target.subresource));
  }

  Response remove(const TypeInfo& info, const std::string& key, const Json& deleteOptions) {
    const std::string typeKey = typeKeyOf(info.type);
    const auto& bucket = objects[typeKey];
    const auto it = bucket.find(key);
    if (it == bucket.end())
      return fail(404, "NotFound", info.type.plural + " \"" + key + "\" not found");
    Json current = it->second;
    if (deleteOptions.is_object() && deleteOptions.has_object_field("preconditions")) {
      const auto& p = deleteOptions.at("preconditions");
      if (p.has_string_field("uid") && p.at("uid").as_string() != kube::uidOf(current)) {
        return fail(409, "Conflict", "Precondition failed: UID in precondition does not match");
      }
      if (p.has_string_field("resourceVersion") &&
          p.at("resourceVersion").as_string() != kube::resourceVersionOf(current)) {
        return fail(409, "Conflict", "Precondition failed: resourceVersion does not match");
      }
    }
    const bool finalizers = current.at("metadata").has_array_field("finalizers") &&
                            current.at("metadata").at("finalizers").as_array().size() > 0;
    if (finalizers) {
      if (!current.at("metadata").has_field("deletionTimestamp")) {
        current["metadata"]["deletionTimestamp"] = Json::string(nowTimestamp());
        current = store(typeKey, key, std::move(current), "MODIFIED");
      }
      return {200, current};
    }
    if (info.type == kube::resources::namespaces()) return terminate(key, std::move(current));
    store(typeKey, key, current, "DELETED");
    if (info.type.namespaced) finishNamespace(kube::namespaceOf(current));
    return {200, statusBody(200, "", "")};
  }

  // Deletes a namespace as the server and the namespace controller do: it turns Terminating
  // (no new content), its objects are deleted (those with finalizers wait for them), and it
  // goes once it is empty. Lock held.
  Response terminate(const std::string& ns, Json current) {
    if (terminating(current)) return {200, current};
    current["metadata"]["deletionTimestamp"] = Json::string(nowTimestamp());
    current["status"]["phase"] = Json::string("Terminating");
    current = store(typeKeyOf(kube::resources::namespaces()), ns, std::move(current), "MODIFIED");
    for (auto& [typeKey, bucket] : objects) {
      if (!types[typeKey].type.namespaced) continue;
      std::vector<std::string> doomed;
      for (const auto& [key, object] : bucket)
        if (kube::namespaceOf(object) == ns) doomed.push_back(key);
      for (const auto& key : doomed) {
        Json object = bucket.at(key);
        const bool finalizers = object.at("metadata").has_array_field("finalizers") &&
                                object.at("metadata").at("finalizers").size() > 0;
        if (!finalizers) {
          store(typeKey, key, std::move(object), "DELETED");
        } else if (!terminating(object)) {
          object["metadata"]["deletionTimestamp"] = Json::string(nowTimestamp());
          store(typeKey, key, std::move(object), "MODIFIED");
        }
      }
    }
    finishNamespace(ns);
    return {200, current};
  }

  Response bind(const Target& target, const Json& binding) {
    const std::string typeKey = typeKeyOf(kube::resources::pods());
    const std::string key = kube::objectKey(target.ns, target.name);
    const auto it = objects[typeKey].find(key);
    if (it == objects[typeKey].end())
      return fail(404, "NotFound", "pods \"" + target.name + "\" not found");
    if (!binding.is_object() || !binding.has_object_field("target") ||
        !binding.at("target").has_string_field("name")) {
      return fail(400, "BadRequest", "binding.target.name is required");
    }
    Json pod = it->second;
    if (binding.has_object_field("metadata") && binding.at("metadata").has_string_field("uid") &&
        binding.at("metadata").at("uid").as_string() != kube::uidOf(pod)) {
      return fail(409, "Conflict", "Precondition failed: UID in binding does not match the pod");
    }
    if (pod.has_object_field("spec") && pod.at("spec").has_string_field("nodeName") &&
        !pod.at("spec").at("nodeName").as_string().empty()) {
      return fail(409, "Conflict",
                  "Operation cannot be fulfilled on pods/binding \"" + target.name + "\": pod " +
                      target.name + " is already assigned to node \"" +
                      pod.at("spec").at("nodeName").as_string() + "\"");
    }
    if (!pod.has_object_field("spec")) pod["spec"] = Json::object();
    pod["spec"]["nodeName"] = binding.at("target").at("name");
    store(typeKey, key, std::move(pod), "MODIFIED");
    return {201, statusBody(201, "", "")};
  }
};

namespace {

void sendJson(mg_connection* conn, int status, const Json& body,
              const std::string& extraHeaders = {}) {
  const std::string text = body.serialize();
  mg_printf(conn,
            "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
            "Connection: close\r\n%s\r\n",
            status, mg_get_response_code_text(nullptr, status), text.size(), extraHeaders.c_str());
  mg_write(conn, text.data(), text.size());
}

bool sendChunk(mg_connection* conn, const std::string& text) {
  return mg_send_chunk(conn, text.data(), static_cast<unsigned>(text.size())) > 0;
}

std::string eventLine(const std::string& type, const Json& object) {
  Json event = Json::object();
  event["type"] = Json::string(type);
  event["object"] = object;
  return event.serialize() + "\n";
}

// Streams a watch: history after the requested resourceVersion, then live events, bookmarks,
// until timeoutSeconds, a drop, or shutdown.
void serveWatch(ApiServerDouble::State& s, mg_connection* conn, const Request& request) {
  std::unique_lock lock(s.mutex);
  auto target = s.resolve(request.path);
  if (!target.isOk() || !target->name.empty()) {
    lock.unlock();
    sendJson(conn, 404, statusBody(404, "NotFound", "cannot watch " + request.path));
    return;
  }
  const TypeInfo info = *target->info;
  const std::string typeKey = typeKeyOf(info.type);
  const std::string ns = target->ns;
  const auto q = [&](const char* k) {
    return request.query.count(k) ? request.query.at(k) : std::string();
  };
  auto labels = kube::LabelSelector::parse(q("labelSelector"));
  auto fields = kube::LabelSelector::parseFields(q("fieldSelector"));
  if (!labels.isOk() || !fields.isOk()) {
    lock.unlock();
    sendJson(conn, 400, statusBody(400, "BadRequest", "bad selector"));
    return;
  }
  const bool bookmarks = q("allowWatchBookmarks") == "true";
  const int timeoutSeconds = q("timeoutSeconds").empty() ? 1800 : std::stoi(q("timeoutSeconds"));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeoutSeconds);
  const std::string rvText = q("resourceVersion");
  const auto matches = [&](const Json& object) {
    return (ns.empty() || !info.type.namespaced || kube::namespaceOf(object) == ns) &&
           labelsMatch(object, *labels, *fields);
  };

  mg_printf(conn,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
            "Connection: close\r\n\r\n");
  ++s.watches;
  ++s.watchesStarted;
  std::vector<std::string> pending;
  uint64_t cursor;
  if (rvText.empty() || rvText == "0") {
    for (const auto& [key, object] : s.objects[typeKey]) {
      if (matches(object)) pending.push_back(eventLine("ADDED", object));
    }
    cursor = s.rv;
  } else {
    cursor = std::stoull(rvText);
    if (cursor + 1 < s.firstRetained) {
      pending.push_back(
          eventLine("ERROR", statusBody(410, "Expired",
                                        "too old resource version: " + rvText + " (" +
                                            std::to_string(s.firstRetained - 1) + ")")));
      lock.unlock();
      for (const auto& line : pending) sendChunk(conn, line);
      mg_send_chunk(conn, "", 0);
      --s.watches;
      return;
    }
  }
  const uint64_t drops = s.dropGeneration;
  auto nextBookmark = std::chrono::steady_clock::now() + s.options.bookmarkInterval;
  bool dropped = false;
  while (true) {
    while (cursor < s.rv && cursor + 1 >= s.firstRetained) {
      const Event& event = s.history[cursor + 1 - s.firstRetained];
      cursor = event.rv;
      if (event.typeKey == typeKey && matches(event.object))
        pending.push_back(eventLine(event.type, event.object));
    }
    const auto now = std::chrono::steady_clock::now();
    if (bookmarks && now >= nextBookmark) {
      Json marker = Json::object();
      marker["kind"] = Json::string(info.type.kind);
      marker["apiVersion"] = Json::string(info.type.apiVersion());
      marker["metadata"] = Json::object();
      marker["metadata"]["resourceVersion"] = Json::string(std::to_string(cursor));
      pending.push_back(eventLine("BOOKMARK", marker));
      nextBookmark = now + s.options.bookmarkInterval;
    }
    if (s.dropGeneration != drops) dropped = true;
    const bool done = s.stopping || dropped || now >= deadline;
    lock.unlock();
    bool ok = true;
    for (const auto& line : pending) ok = ok && sendChunk(conn, line);
    pending.clear();
    if (!ok || done) break;
    lock.lock();
    s.changed.wait_until(lock, std::min(deadline, bookmarks ? nextBookmark : deadline),
                         [&] { return s.stopping || s.dropGeneration != drops || cursor < s.rv; });
  }
  if (dropped) {
    // Cut mid-line and without the final chunk; the server closes every connection after its
    // response (keep-alive is off), so the client sees a broken stream.
    sendChunk(conn, "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":");
  } else {
    mg_send_chunk(conn, "", 0);
  }
  --s.watches;
}

int handleRequest(mg_connection* conn, void* data) {
  auto& s = *static_cast<ApiServerDouble::State*>(data);
  const mg_request_info* info = mg_get_request_info(conn);
  ++s.requests;
  Request request;
  request.method = info->request_method;
  request.path = info->local_uri ? info->local_uri : "/";
  request.query = parseQuery(info->query_string);
  if (const char* type = mg_get_header(conn, "Content-Type")) request.contentType = type;
  char buffer[16384];
  for (int n; (n = mg_read(conn, buffer, sizeof buffer)) > 0;) request.body.append(buffer, n);

  std::chrono::milliseconds latency;
  {
    std::lock_guard lock(s.mutex);
    latency = s.latency;
    if (!s.options.token.empty()) {
      const char* auth = mg_get_header(conn, "Authorization");
      if (!auth || std::string(auth) != "Bearer " + s.options.token) {
        sendJson(conn, 401, statusBody(401, "Unauthorized", "Unauthorized"));
        return 401;
      }
    }
    if (s.failCount > 0) {
      --s.failCount;
      const std::string headers =
          s.failRetryAfter >= 0 ? "Retry-After: " + std::to_string(s.failRetryAfter) + "\r\n" : "";
      sendJson(conn, s.failStatus,
               statusBody(s.failStatus, s.failStatus == 429 ? "TooManyRequests" : "InternalError",
                          "injected failure"),
               headers);
      return s.failStatus;
    }
  }
  if (latency.count() > 0) std::this_thread::sleep_for(latency);
  const auto watch = request.query.find("watch");
  if (request.method == "GET" && watch != request.query.end() &&
      (watch->second == "1" || watch->second == "true")) {
    bool refused;
    {
      std::lock_guard lock(s.mutex);
      refused = s.refuseWatches;
    }
    if (refused) {
      sendJson(conn, 503, statusBody(503, "ServiceUnavailable", "watches are refused"));
      return 503;
    }
    serveWatch(s, conn, request);
    return 200;
  }
  Response response;
  try {
    response = s.handle(request);
  } catch (const std::exception& e) {
    response = fail(400, "BadRequest", std::string("malformed request: ") + e.what());
  }
  {
    std::lock_guard lock(s.mutex);
    if (s.garbleCount > 0 && response.status < 300) {
      --s.garbleCount;
      const std::string garbage = "<html>upstream proxy error</html>";
      mg_printf(conn,
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %zu\r\n"
                "Connection: close\r\n\r\n%s",
                garbage.size(), garbage.c_str());
      return 200;
    }
  }
  sendJson(conn, response.status, response.body);
  return response.status;
}

}  // namespace

ApiServerDouble::ApiServerDouble(std::unique_ptr<State> state) : state_(std::move(state)) {}

ApiServerDouble::~ApiServerDouble() {
  {
    std::lock_guard lock(state_->mutex);
    state_->stopping = true;
    state_->changed.notify_all();
  }
  state_->tls.reset();
  mg_stop(state_->context);
}

Result<std::unique_ptr<ApiServerDouble>> ApiServerDouble::start(ApiServerDoubleOptions options) {
  auto state = std::make_unique<State>();
  state->options = std::move(options);
  state->addBuiltinTypes();
  if (!state->options.crdDirectory.empty()) {
    for (const auto& entry : std::filesystem::directory_iterator(state->options.crdDirectory)) {
      if (entry.path().extension() != ".yaml") continue;
      GRANARY_ASSIGN_OR_RETURN(auto documents, config::loadFile(entry.path()));
      for (const auto& document : documents) {
        GRANARY_RETURN_IF_ERROR(state->registerCrd(kube::toJson(document)));
      }
    }
  }
  mg_init_library(0);
  const char* civetOptions[] = {
      "listening_ports",    "127.0.0.1:0", "num_threads", "64", "enable_keep_alive", "no",
      "request_timeout_ms", "3600000",     nullptr};
  mg_callbacks callbacks{};
  callbacks.log_message = [](const mg_connection*, const char*) { return 1; };
  state->context = mg_start(&callbacks, state.get(), civetOptions);
  if (!state->context) return unavailable("the API server double could not listen on 127.0.0.1");
  mg_set_request_handler(state->context, "/", handleRequest, state.get());
  mg_server_port ports[1];
  if (mg_get_server_ports(state->context, 1, ports) < 1) {
    mg_stop(state->context);
    return unavailable("the API server double has no listening port");
  }
  state->port = ports[0].port;
  if (!state->options.tlsCertificateFile.empty()) {
    // HTTPS in front of the plain server.
    GRANARY_ASSIGN_OR_RETURN(state->tls,
                             TlsProxy::start(state->port, state->options.tlsCertificateFile,
                                             state->options.clientCaFile));
  }
  return std::unique_ptr<ApiServerDouble>(new ApiServerDouble(std::move(state)));
}

std::string ApiServerDouble::url() const {
  if (state_->tls) return "https://127.0.0.1:" + std::to_string(state_->tls->port());
  return "http://127.0.0.1:" + std::to_string(state_->port);
}

kube::RestConfig ApiServerDouble::restConfig() const {
  kube::RestConfig config;
  config.server = url();
  config.bearerToken = Secret(state_->options.token);
  config.timeout = std::chrono::seconds(10);
  return config;
}

Status ApiServerDouble::registerCrd(const Json& crd) {
  std::lock_guard lock(state_->mutex);
  return state_->registerCrd(crd);
}

void ApiServerDouble::setToken(const std::string& token) {
  std::lock_guard lock(state_->mutex);
  state_->options.token = token;
}

void ApiServerDouble::garbleNextResponses(int count) {
  std::lock_guard lock(state_->mutex);
  state_->garbleCount = count;
}

void ApiServerDouble::failNextRequests(int count, int httpStatus, int retryAfterSeconds) {
  std::lock_guard lock(state_->mutex);
  state_->failCount = count;
  state_->failStatus = httpStatus;
  state_->failRetryAfter = retryAfterSeconds;
}

void ApiServerDouble::setLatency(std::chrono::milliseconds latency) {
  std::lock_guard lock(state_->mutex);
  state_->latency = latency;
}

void ApiServerDouble::dropWatches() {
  std::lock_guard lock(state_->mutex);
  ++state_->dropGeneration;
  state_->changed.notify_all();
}

void ApiServerDouble::refuseWatches(bool refuse) {
  std::lock_guard lock(state_->mutex);
  state_->refuseWatches = refuse;
}

void ApiServerDouble::compact() {
  std::lock_guard lock(state_->mutex);
  state_->firstRetained += state_->history.size();
  state_->history.clear();
}

uint64_t ApiServerDouble::resourceVersion() const {
  std::lock_guard lock(state_->mutex);
  return state_->rv;
}

int ApiServerDouble::openWatches() const { return state_->watches; }
int64_t ApiServerDouble::watchesStarted() const { return state_->watchesStarted; }
int64_t ApiServerDouble::requestCount() const { return state_->requests; }

}  // namespace granary::testing

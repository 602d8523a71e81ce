#include "tests/support/api_server_rules.h"

#include <optional>
#include <regex>
#include <set>

#include "common/cluster/resources.h"

namespace granary::testing::rules {

using kube::Json;

namespace {

std::string join(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

std::string indexed(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

std::vector<std::string> keysOf(const Json& object) {
  std::vector<std::string> keys;
  for (const auto& field : object.as_object()) keys.push_back(field.first);
  return keys;
}

bool isTrue(const Json& schema, const char* key) {
  return schema.has_boolean_field(key) && schema.at(key).as_bool();
}

// Prunes `value` against `schema`, appending the removed paths to `removed`.
void prune(Json& value, const Json& schema, const std::string& path,
           std::vector<std::string>& removed) {
  if (!schema.is_object()) return;
  if (value.is_array() && schema.has_object_field("items")) {
    for (size_t i = 0; i < value.size(); ++i)
      prune(value[i], schema.at("items"), indexed(path, i), removed);
    return;
  }
  if (!value.is_object()) return;
  const bool preserve = isTrue(schema, "x-kubernetes-preserve-unknown-fields");
  const bool embedded = isTrue(schema, "x-kubernetes-embedded-resource");
  const Json& additional =
      schema.has_field("additionalProperties") ? schema.at("additionalProperties") : Json();
  for (const std::string& key : keysOf(value)) {
    if (schema.has_object_field("properties") && schema.at("properties").has_field(key)) {
      prune(value[key], schema.at("properties").at(key), join(path, key), removed);
    } else if (additional.is_object()) {
      prune(value[key], additional, join(path, key), removed);
    } else if (preserve || (additional.is_boolean() && additional.as_bool()) ||
               (embedded && (key == "apiVersion" || key == "kind" || key == "metadata"))) {
      continue;
    } else {
      removed.push_back(join(path, key));
      kube::eraseField(value, key);
    }
  }
}

// Every field of apiextensions.k8s.io/v1 JSONSchemaProps.
const std::set<std::string>& schemaPropsFields() {
  static const std::set<std::string> fields = {"id",
                                               "$schema",
                                               "$ref",
                                               "description",
                                               "type",
                                               "format",
                                               "title",
                                               "default",
                                               "maximum",
                                               "exclusiveMaximum",
                                               "minimum",
                                               "exclusiveMinimum",
                                               "maxLength",
                                               "minLength",
                                               "pattern",
                                               "maxItems",
                                               "minItems",
                                               "uniqueItems",
                                               "multipleOf",
                                               "enum",
                                               "maxProperties",
                                               "minProperties",
                                               "required",
                                               "items",
                                               "allOf",
                                               "oneOf",
                                               "anyOf",
                                               "not",
                                               "properties",
                                               "additionalProperties",
                                               "patternProperties",
                                               "dependencies",
                                               "additionalItems",
                                               "definitions",
                                               "externalDocs",
                                               "example",
                                               "nullable",
                                               "x-kubernetes-preserve-unknown-fields",
                                               "x-kubernetes-embedded-resource",
                                               "x-kubernetes-int-or-string",
                                               "x-kubernetes-list-map-keys",
                                               "x-kubernetes-list-type",
                                               "x-kubernetes-map-type",
                                               "x-kubernetes-validations"};
  return fields;
}

void pruneSchemaProps(Json& schema, const std::string& path, std::vector<std::string>& removed);

void pruneSchemaMap(Json& map, const std::string& path, std::vector<std::string>& removed) {
  if (!map.is_object()) return;
  for (const std::string& key : keysOf(map)) pruneSchemaProps(map[key], join(path, key), removed);
}

void pruneSchemaOrList(Json& value, const std::string& path, std::vector<std::string>& removed) {
  if (value.is_array()) {
    for (size_t i = 0; i < value.size(); ++i) pruneSchemaProps(value[i], indexed(path, i), removed);
  } else {
    pruneSchemaProps(value, path, removed);
  }
}

void pruneSchemaProps(Json& schema, const std::string& path, std::vector<std::string>& removed) {
  if (!schema.is_object()) return;
  for (const std::string& key : keysOf(schema)) {
    if (!schemaPropsFields().contains(key)) {
      removed.push_back(join(path, key));
      kube::eraseField(schema, key);
      continue;
    }
    const std::string at = join(path, key);
    if (key == "properties" || key == "patternProperties" || key == "definitions" ||
        key == "dependencies")
      pruneSchemaMap(schema[key], at, removed);
    else if (key == "items" || key == "allOf" || key == "oneOf" || key == "anyOf")
      pruneSchemaOrList(schema[key], at, removed);
    else if (key == "not" || key == "additionalProperties" || key == "additionalItems")
      pruneSchemaProps(schema[key], at, removed);
  }
}

// Removes keys of `object` outside `known`.
void pruneKeys(Json& object, const std::set<std::string>& known, const std::string& path,
               std::vector<std::string>& removed) {
  if (!object.is_object()) return;
  for (const std::string& key : keysOf(object)) {
    if (known.contains(key)) continue;
    removed.push_back(join(path, key));
    kube::eraseField(object, key);
  }
}

const std::regex kDnsLabel("[a-z0-9]([-a-z0-9]*[a-z0-9])?");
const std::regex kDnsSubdomain("[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*");
const std::regex kDns1035Label("[a-z]([-a-z0-9]*[a-z0-9])?");
const std::regex kLabelValue("(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?");
const std::regex kEnvName("[-._a-zA-Z][-._a-zA-Z0-9]*");

bool dnsLabel(const std::string& s) { return s.size() <= 63 && std::regex_match(s, kDnsLabel); }

std::string invalid(const std::string& path, const std::string& value, const std::string& why) {
  return path + ": Invalid value: \"" + value + "\": " + why;
}

std::string str(const Json& object, const char* key) {
  return object.has_string_field(key) ? object.at(key).as_string() : "";
}

// A qualified name (label key): an optional DNS-subdomain prefix, '/', and a name.
bool qualifiedName(const std::string& key) {
  const size_t slash = key.find('/');
  const std::string name = slash == std::string::npos ? key : key.substr(slash + 1);
  if (slash != std::string::npos) {
    const std::string prefix = key.substr(0, slash);
    if (prefix.empty() || prefix.size() > 253 || !std::regex_match(prefix, kDnsSubdomain))
      return false;
  }
  return !name.empty() && name.size() <= 63 && std::regex_match(name, kLabelValue);
}

void labelProblems(const Json& metadata, std::vector<std::string>& problems) {
  if (!metadata.has_object_field("labels")) return;
  for (const auto& [key, value] : metadata.at("labels").as_object()) {
    if (!qualifiedName(key))
      problems.push_back(invalid("metadata.labels", key,
                                 "name part must consist of alphanumeric characters, '-', '_' or "
                                 "'.', and must start and end with an alphanumeric character"));
    const std::string text = value.is_string() ? value.as_string() : value.serialize();
    if (!value.is_string() || text.size() > 63 || !std::regex_match(text, kLabelValue))
      problems.push_back(invalid("metadata.labels", text,
                                 "a valid label must be an empty string or consist of alphanumeric "
                                 "characters, '-', '_' or '.', and must start and end with an "
                                 "alphanumeric character"));
  }
}

// An extended resource (a device plugin's, such as nvidia.com/gpu): outside kubernetes.io.
bool extendedResource(const std::string& name) {
  const size_t slash = name.find('/');
  if (slash == std::string::npos) return false;
  const std::string domain = name.substr(0, slash);
  return domain != "kubernetes.io" && !domain.ends_with(".kubernetes.io") &&
         !name.starts_with("requests.");
}

// An extended resource's amount (whole units); nullopt when malformed.
std::optional<int64_t> quantityOf(const std::string& name, const Json& value) {
  cluster::Resources amount;
  const std::string text = value.is_string() ? value.as_string() : value.serialize();
  if (!cluster::addQuantity(amount, name, text).isOk()) return std::nullopt;
  return amount.extendedOf(name);
}

void resourceProblems(const Json& container, const std::string& path,
                      std::vector<std::string>& problems) {
  if (!container.has_object_field("resources")) return;
  const Json& resources = container.at("resources");
  const Json limits =
      resources.has_object_field("limits") ? resources.at("limits") : Json::object();
  if (!resources.has_object_field("requests")) return;
  for (const auto& [name, request] : resources.at("requests").as_object()) {
    if (!extendedResource(name)) continue;
    if (!limits.has_field(name)) {
      problems.push_back(path +
                         ".resources.limits: Required value: Limit must be set for non "
                         "overcommitable resources");
    } else if (quantityOf(name, request) != quantityOf(name, limits.at(name))) {
      problems.push_back(invalid(path + ".resources.requests",
                                 request.is_string() ? request.as_string() : request.serialize(),
                                 "must be equal to " + name + " limit"));
    }
  }
}

void containerProblems(const Json& container, const std::string& path,
                       const std::set<std::string>& volumes, std::vector<std::string>& problems) {
  const std::string name = str(container, "name");
  if (name.empty())
    problems.push_back(path + ".name: Required value");
  else if (!dnsLabel(name))
    problems.push_back(invalid(path + ".name", name,
                               "a lowercase RFC 1123 label must consist of "
                               "lower case alphanumeric characters or '-'"));
  if (str(container, "image").empty()) problems.push_back(path + ".image: Required value");
  if (container.has_array_field("env")) {
    const Json& env = container.at("env");
    for (size_t i = 0; i < env.size(); ++i) {
      const std::string variable = str(env.at(i), "name");
      if (variable.empty())
        problems.push_back(indexed(path + ".env", i) + ".name: Required value");
      else if (!std::regex_match(variable, kEnvName))
        problems.push_back(invalid(indexed(path + ".env", i) + ".name", variable,
                                   "a valid environment variable name must consist of alphabetic "
                                   "characters, digits, '_', '-', or '.', and must not start with "
                                   "a digit"));
    }
  }
  if (container.has_array_field("volumeMounts")) {
    const Json& mounts = container.at("volumeMounts");
    for (size_t i = 0; i < mounts.size(); ++i) {
      const std::string at = indexed(path + ".volumeMounts", i);
      const std::string volume = str(mounts.at(i), "name");
      if (!volumes.contains(volume))
        problems.push_back(at + ".name: Not found: \"" + volume + "\"");
      if (str(mounts.at(i), "mountPath").empty())
        problems.push_back(at + ".mountPath: Required value");
    }
  }
  resourceProblems(container, path, problems);
}

// The spec without what a pod update may change.
Json immutablePart(const Json& pod) {
  Json spec = pod.has_object_field("spec") ? pod.at("spec") : Json::object();
  for (const char* field : {"activeDeadlineSeconds", "tolerations", "schedulingGates",
                            "terminationGracePeriodSeconds", "nodeName"})
    kube::eraseField(spec, field);
  for (const char* list : {"containers", "initContainers"}) {
    if (!spec.has_array_field(list)) continue;
    for (size_t i = 0; i < spec.at(list).size(); ++i) kube::eraseField(spec[list][i], "image");
  }
  return spec;
}

}  // namespace

std::vector<std::string> pruneUnknownFields(Json& object, const Json& schema) {
  std::vector<std::string> removed;
  if (!object.is_object()) return removed;
  for (const std::string& key : keysOf(object)) {
    if (key == "apiVersion" || key == "kind" || key == "metadata") continue;
    if (schema.has_object_field("properties") && schema.at("properties").has_field(key)) {
      prune(object[key], schema.at("properties").at(key), key, removed);
    } else if (!isTrue(schema, "x-kubernetes-preserve-unknown-fields")) {
      removed.push_back(key);
      kube::eraseField(object, key);
    }
  }
  return removed;
}

std::vector<std::string> pruneUnknownCrdFields(Json& crd) {
  std::vector<std::string> removed;
  pruneKeys(crd, {"apiVersion", "kind", "metadata", "spec", "status"}, "", removed);
  if (!crd.has_object_field("spec")) return removed;
  Json& spec = crd["spec"];
  pruneKeys(spec, {"group", "names", "scope", "versions", "conversion", "preserveUnknownFields"},
            "spec", removed);
  if (!spec.has_array_field("versions")) return removed;
  for (size_t i = 0; i < spec.at("versions").size(); ++i) {
    Json& version = spec["versions"][i];
    const std::string path = indexed("spec.versions", i);
    pruneKeys(version,
              {"name", "served", "storage", "deprecated", "deprecationWarning", "schema",
               "subresources", "additionalPrinterColumns", "selectableFields"},
              path, removed);
    if (version.has_object_field("schema")) {
      pruneKeys(version["schema"], {"openAPIV3Schema"}, path + ".schema", removed);
      if (version.at("schema").has_object_field("openAPIV3Schema"))
        pruneSchemaProps(version["schema"]["openAPIV3Schema"], path + ".schema.openAPIV3Schema",
                         removed);
    }
  }
  return removed;
}

std::vector<std::string> metadataProblems(const Json& object, const std::string& plural) {
  std::vector<std::string> problems;
  if (!object.has_object_field("metadata")) return problems;
  const Json& metadata = object.at("metadata");
  const std::string name = str(metadata, "name");
  if (plural == "namespaces") {
    if (!dnsLabel(name))
      problems.push_back(invalid("metadata.name", name,
                                 "a lowercase RFC 1123 label must consist "
                                 "of lower case alphanumeric characters "
                                 "or '-'"));
  } else if (plural == "services") {
    if (name.size() > 63 || !std::regex_match(name, kDns1035Label))
      problems.push_back(invalid("metadata.name", name,
                                 "a DNS-1035 label must consist of lower case alphanumeric "
                                 "characters or '-', start with an alphabetic character"));
  } else if (name.size() > 253 || !std::regex_match(name, kDnsSubdomain)) {
    problems.push_back(invalid("metadata.name", name,
                               "a lowercase RFC 1123 subdomain must "
                               "consist of lower case alphanumeric "
                               "characters, '-' or '.'"));
  }
  labelProblems(metadata, problems);
  return problems;
}

std::string base64(const std::string& bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t group = static_cast<unsigned char>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) group |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) group |= static_cast<unsigned char>(bytes[i + 2]);
    out += kAlphabet[(group >> 18) & 63];
    out += kAlphabet[(group >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(group >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[group & 63] : '=';
  }
  return out;
}

void mergeStringData(Json& secret) {
  if (!secret.has_object_field("stringData")) return;
  const Json given = secret.at("stringData");  // a copy: adding data may move secret's fields
  if (!secret.has_object_field("data")) secret["data"] = Json::object();
  for (const auto& [key, value] : given.as_object())
    if (value.is_string()) secret["data"][key] = Json::string(base64(value.as_string()));
  kube::eraseField(secret, "stringData");
}

namespace {

constexpr const char* kTokenPath = "/var/run/secrets/kubernetes.io/serviceaccount";

// ServiceAccount admission's projected volume of the account's token, the cluster's CA and the
// namespace, mounted in every container (plugin/pkg/admission/serviceaccount).
void mountServiceAccountToken(Json& spec, const std::string& podName) {
  if (spec.has_boolean_field("automountServiceAccountToken") &&
      !spec.at("automountServiceAccountToken").as_bool())
    return;
  for (const char* list : {"containers", "initContainers"}) {
    if (!spec.has_array_field(list)) continue;
    for (const auto& container : spec.at(list).as_array()) {
      if (!container.has_array_field("volumeMounts")) continue;
      for (const auto& mount : container.at("volumeMounts").as_array())
        if (str(mount, "mountPath") == kTokenPath) return;
    }
  }
  // The server's suffix is random; five characters of the pod's name's hash stand in for it.
  size_t hash = std::hash<std::string>{}(podName);
  std::string name = "kube-api-access-";
  for (int i = 0; i < 5; ++i, hash /= 36) name += "abcdefghijklmnopqrstuvwxyz0123456789"[hash % 36];
  Json volume = Json::object();
  volume["name"] = Json::string(name);
  Json& projected = volume["projected"];
  projected["defaultMode"] = Json::number(420);
  projected["sources"][0]["serviceAccountToken"]["expirationSeconds"] = Json::number(3607);
  projected["sources"][0]["serviceAccountToken"]["path"] = Json::string("token");
  projected["sources"][1]["configMap"]["name"] = Json::string("kube-root-ca.crt");
  projected["sources"][1]["configMap"]["items"][0]["key"] = Json::string("ca.crt");
  projected["sources"][1]["configMap"]["items"][0]["path"] = Json::string("ca.crt");
  Json& field = projected["sources"][2]["downwardAPI"]["items"][0];
  field["path"] = Json::string("namespace");
  field["fieldRef"]["apiVersion"] = Json::string("v1");
  field["fieldRef"]["fieldPath"] = Json::string("metadata.namespace");
  if (!spec.has_array_field("volumes")) spec["volumes"] = Json::array();
  spec["volumes"][spec.at("volumes").size()] = std::move(volume);
  for (const char* list : {"containers", "initContainers"}) {
    if (!spec.has_array_field(list)) continue;
    for (size_t i = 0; i < spec.at(list).size(); ++i) {
      Json& container = spec[list][i];
      if (!container.has_array_field("volumeMounts")) container["volumeMounts"] = Json::array();
      Json mount = Json::object();
      mount["name"] = Json::string(name);
      mount["mountPath"] = Json::string(kTokenPath);
      mount["readOnly"] = Json::boolean(true);
      container["volumeMounts"][container.at("volumeMounts").size()] = std::move(mount);
    }
  }
}

}  // namespace

void defaultPod(Json& pod) {
  if (!pod.has_object_field("spec")) return;
  Json& spec = pod["spec"];
  std::string account = str(spec, "serviceAccountName");
  if (account.empty()) account = str(spec, "serviceAccount");
  if (account.empty()) account = "default";
  spec["serviceAccountName"] = Json::string(account);
  spec["serviceAccount"] = Json::string(account);
  mountServiceAccountToken(spec, kube::nameOf(pod));
  for (const char* list : {"containers", "initContainers"}) {
    if (!spec.has_array_field(list)) continue;
    for (size_t i = 0; i < spec.at(list).size(); ++i) {
      Json& container = spec[list][i];
      if (!container.has_object_field("resources") ||
          !container.at("resources").has_object_field("limits"))
        continue;
      Json& resources = container["resources"];
      if (!resources.has_object_field("requests")) resources["requests"] = Json::object();
      const Json limits = resources.at("limits");  // a copy: requests grows beside it
      for (const auto& [name, limit] : limits.as_object())
        if (!resources.at("requests").has_field(name)) resources["requests"][name] = limit;
    }
  }
}

std::vector<std::string> podProblems(const Json& pod) {
  std::vector<std::string> problems;
  const Json spec = pod.has_object_field("spec") ? pod.at("spec") : Json::object();
  std::set<std::string> volumes;
  if (spec.has_array_field("volumes")) {
    for (size_t i = 0; i < spec.at("volumes").size(); ++i) {
      const std::string name = str(spec.at("volumes").at(i), "name");
      const std::string at = indexed("spec.volumes", i) + ".name";
      if (!dnsLabel(name))
        problems.push_back(invalid(at, name,
                                   "a lowercase RFC 1123 label must consist of lower "
                                   "case alphanumeric characters or '-'"));
      else if (!volumes.insert(name).second)
        problems.push_back(at + ": Duplicate value: \"" + name + "\"");
    }
  }
  if (!spec.has_array_field("containers") || spec.at("containers").size() == 0)
    problems.push_back("spec.containers: Required value");
  std::set<std::string> names;
  for (const char* list : {"initContainers", "containers"}) {
    if (!spec.has_array_field(list)) continue;
    for (size_t i = 0; i < spec.at(list).size(); ++i) {
      const Json& container = spec.at(list).at(i);
      const std::string path = indexed(std::string("spec.") + list, i);
      containerProblems(container, path, volumes, problems);
      const std::string name = str(container, "name");
      if (!name.empty() && !names.insert(name).second)
        problems.push_back(path + ".name: Duplicate value: \"" + name + "\"");
    }
  }
  return problems;
}

std::vector<std::string> podUpdateProblems(const Json& current, const Json& next) {
  if (immutablePart(current) == immutablePart(next)) return {};
  return {
      "spec: Forbidden: pod updates may not change fields other than "
      "`spec.containers[*].image`, `spec.initContainers[*].image`, "
      "`spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to existing "
      "tolerations) or `spec.terminationGracePeriodSeconds`"};
}

void taintNewNode(Json& node) {
  if (!node.has_object_field("spec")) node["spec"] = Json::object();
  Json& spec = node["spec"];
  if (!spec.has_array_field("taints")) spec["taints"] = Json::array();
  for (const auto& taint : spec.at("taints").as_array())
    if (str(taint, "key") == kNotReadyTaint) return;
  Json taint = Json::object();
  taint["key"] = Json::string(kNotReadyTaint);
  taint["effect"] = Json::string("NoSchedule");
  spec["taints"][spec.at("taints").size()] = taint;
}

}  // namespace granary::testing::rules

// Accessors for the metadata of Kubernetes objects held as JSON. Pure.
#pragma once

#include <cpprest/json.h>

#include <chrono>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"

namespace granary::kube {

using Json = web::json::value;
// Objects in caches and events are shared and never modified after they are stored.
using ObjectPtr = std::shared_ptr<const Json>;

// JSON text as an API server sends it: an error when it is not JSON or holds a number no double
// can hold (1e999 would parse as infinity, which JSON cannot write back).
Result<Json> parseJson(std::string_view text);

// metadata.<field> as a string; "" when absent.
std::string metadataField(const Json& object, const char* field);
inline std::string nameOf(const Json& o) { return metadataField(o, "name"); }
inline std::string namespaceOf(const Json& o) { return metadataField(o, "namespace"); }
inline std::string resourceVersionOf(const Json& o) { return metadataField(o, "resourceVersion"); }
inline std::string uidOf(const Json& o) { return metadataField(o, "uid"); }
// metadata.generation; 1 when absent (objects of types without generations).
int64_t generationOf(const Json& object);

// The cache key of an object: "namespace/name", or "name" when cluster-scoped.
std::string objectKey(const Json& object);
std::string objectKey(const std::string& ns, const std::string& name);
// Splits a key into namespace ("" for cluster-scoped) and name.
std::pair<std::string, std::string> splitKey(const std::string& key);

// metadata.labels (or another string map under metadata, e.g. "annotations").
std::map<std::string, std::string> stringMap(const Json& object, const char* field = "labels");

// Removes `field` from a JSON object if it is there (web::json's erase throws when absent).
void eraseField(Json& object, const std::string& field);

// metav1.Time (RFC 3339, seconds, UTC) and metav1.MicroTime (microseconds).
std::string metav1Time(std::chrono::system_clock::time_point time);
std::string metav1MicroTime(std::chrono::system_clock::time_point time);
// Reads either (fractions of a second are dropped); nullopt when `text` is not one.
std::optional<std::chrono::system_clock::time_point> parseMetav1Time(const std::string& text);

// Follows a dotted path ("spec.nodeName"); null Json when any step is missing.
Json pathValue(const Json& object, const std::string& dottedPath);

// `object` with only the fields at `dottedPaths` ("metadata.labels", "status.conditions"), and
// its apiVersion and kind: what an informer keeps of objects it reads a few fields of.
Json projection(const Json& object, std::initializer_list<const char*> dottedPaths);

// Whether two values mean the same JSON: numbers compare by value (2 and 2.0 are equal, as
// after a round trip through an API server), objects regardless of key order.
bool sameJson(const Json& a, const Json& b);

// Whether `after` differs from `before` in more than its status and the server's bookkeeping
// (resourceVersion, managedFields): its spec, labels, annotations, finalizers, owners, deletion.
// A controller that writes an object's status need not hear of that write again.
bool changedBesidesStatus(const Json& before, const Json& after);

}  // namespace granary::kube

#include "common/kube/event_recorder.h"

#include <cstdio>

#include "common/log.h"

namespace granary::kube {

EventRecorder::EventRecorder(Client& client, std::string component, Clock& clock)
    : client_(client), component_(std::move(component)), clock_(clock) {}

void EventRecorder::record(const Json& object, EventType type, const std::string& reason,
                           const std::string& message) {
  static const Logger log("events");
  const std::string ns = namespaceOf(object).empty() ? "default" : namespaceOf(object);
  const std::string typeName = type == EventType::kNormal ? "Normal" : "Warning";
  const std::string identity = uidOf(object) + "|" + typeName + "|" + reason + "|" + message;
  const std::string now = metav1Time(clock_.wallNow());

  MutexLock lock(mutex_);
  if (auto it = written_.find(identity); it != written_.end()) {
    Json patch = Json::object();
    patch["count"] = Json::number(++it->second.count);
    patch["lastTimestamp"] = Json::string(now);
    if (client_.mergePatch(resources::events(), it->second.ns, it->second.name, patch).isOk()) {
      return;
    }
    written_.erase(it);  // the Event expired or was deleted: write a new one
  }

  char suffix[24];
  std::snprintf(suffix, sizeof suffix, ".%llx",
                static_cast<unsigned long long>(clock_.wallNow().time_since_epoch().count()));
  Json event = Json::object();
  event["apiVersion"] = Json::string("v1");
  event["kind"] = Json::string("Event");
  event["metadata"] = Json::object();
  event["metadata"]["name"] = Json::string(nameOf(object) + suffix);
  event["metadata"]["namespace"] = Json::string(ns);
  Json involved = Json::object();
  for (const char* field : {"apiVersion", "kind"}) {
    if (object.has_string_field(field)) involved[field] = object.at(field);
  }
  involved["name"] = Json::string(nameOf(object));
  if (!namespaceOf(object).empty()) involved["namespace"] = Json::string(namespaceOf(object));
  if (!uidOf(object).empty()) involved["uid"] = Json::string(uidOf(object));
  event["involvedObject"] = involved;
  event["type"] = Json::string(typeName);
  event["reason"] = Json::string(reason);
  event["message"] = Json::string(message);
  event["source"] = Json::object();
  event["source"]["component"] = Json::string(component_);
  event["reportingComponent"] = Json::string(component_);
  event["firstTimestamp"] = Json::string(now);
  event["lastTimestamp"] = Json::string(now);
  event["count"] = Json::number(1);
  auto created = client_.create(resources::events(), ns, event);
  if (!created.isOk()) {
    log.warn("cannot record event",
             {{"object", objectKey(object)}, {"reason", reason}, {"error", created.status()}});
    return;
  }
  if (written_.size() >= 4096) written_.clear();  // bounded memory; repeats start a new Event
  written_[identity] = Written{ns, nameOf(*created), 1};
}

}  // namespace granary::kube

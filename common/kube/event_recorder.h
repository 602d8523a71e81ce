// Records core/v1 Events about objects, as `kubectl describe` shows them. Best effort: a failure
// to record is logged, never returned. A repeat of the same event (object, type, reason,
// message) increments the count of the Event already written instead of adding another.
// Thread-safe.
#pragma once

#include <map>
#include <string>

#include "common/clock.h"
#include "common/kube/client.h"
#include "common/thread_annotations.h"

namespace granary::kube {

enum class EventType { kNormal, kWarning };

class EventRecorder {
 public:
  // `component` is the reporter, e.g. "granary-operator". `client` must outlive the recorder.
  EventRecorder(Client& client, std::string component, Clock& clock = realClock());

  // `reason` is CamelCase (e.g. "WarmStarted"); `message` is for people and must not carry
  // credentials.
  void record(const Json& object, EventType type, const std::string& reason,
              const std::string& message);

 private:
  struct Written {
    std::string ns, name;
    int count = 0;
  };
  Client& client_;
  std::string component_;
  Clock& clock_;
  Mutex mutex_;
  std::map<std::string, Written> written_ GRANARY_GUARDED_BY(mutex_);
};

}  // namespace granary::kube

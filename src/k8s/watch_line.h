// One line of a Kubernetes watch stream, `{"type": ADDED|MODIFIED|DELETED|BOOKMARK|ERROR,
// "object": …}`, classified the way every reconciler needs it: ERROR 410 (Expired) means list
// again, a BOOKMARK only moves the resourceVersion, anything else unreadable is an error.
// Internal to src/k8s/. Thread safety: pure.
#pragma once

#include <string>
#include <string_view>

#include "k8s/json_read.h"
#include "k8s/pool_discovery.h"

namespace kvroute::k8s {

struct WatchLine {
  WatchReconciler::Event event = WatchReconciler::Event::kError;
  std::string type;              // with kApplied: ADDED, MODIFIED or DELETED
  std::string resource_version;  // the object's metadata.resourceVersion ("" if none)
  json_read::json::value root;
  // The event's object (the Pod, the EndpointSlice); null when there is none.
  const json_read::json::object* object() const {
    return json_read::Obj(json_read::Field(json_read::Obj(&root), "object"));
  }
};

inline WatchLine ReadWatchLine(std::string_view text) {
  using namespace json_read;
  WatchLine line;
  auto v = Parse(text);
  if (!v) return line;
  line.root = std::move(*v);
  line.type = Str(Obj(&line.root), "type");
  const json::object* object = line.object();
  if (line.type == "ERROR") {
    const json::value* code = Field(object, "code");
    line.event = code && code->is_int64() && code->as_int64() == 410 ? WatchReconciler::Event::kGone
                                                                       : WatchReconciler::Event::kError;
    return line;
  }
  if (!object) return line;
  line.resource_version = Str(Obj(Field(object, "metadata")), "resourceVersion");
  if (line.type == "BOOKMARK") {
    line.event = WatchReconciler::Event::kBookmark;
  } else if (line.type == "ADDED" || line.type == "MODIFIED" || line.type == "DELETED") {
    line.event = WatchReconciler::Event::kApplied;
  }
  return line;
}

}  // namespace kvroute::k8s

// Where a discovered pod's engine publishes its KV events, read from the Pod object, so a
// pool found through Kubernetes routes in precise mode (the index fed by the engines' own
// events) and not only on kvroute's predictions. Sources, first found wins:
//   1. annotations `kvroute.io/kv-events-port` (the PUB port the engine binds), optional
//      `kvroute.io/kv-events-replay-port` (its replay ROUTER) and `kvroute.io/kv-events-topic`
//      — for any engine, and to override what the arguments say;
//   2. vLLM's `--kv-events-config <JSON>` (or `=<JSON>`) among a container's command and args,
//      with `enable_kv_cache_events: true` and a publisher other than "null": its `endpoint`
//      (default tcp://*:5557), `replay_endpoint`, `topic`.
// Only an engine that binds (a `*` or `::` host, vLLM's rule) can be subscribed per pod: the
// subscriber connects to the pod's IP on that port (gateway/kv_feed). An engine that connects
// out (`tcp://indexer:5557`, llm-d's central-socket mode) is not per-pod: nullopt.
// Thread safety: pure.
#pragma once

#include <optional>

#include "fleet/worker_spec.h"

namespace boost::json {
class object;
}

namespace kvroute::k8s {

inline constexpr const char* kKvEventsPortAnnotation = "kvroute.io/kv-events-port";
inline constexpr const char* kKvEventsReplayPortAnnotation = "kvroute.io/kv-events-replay-port";
inline constexpr const char* kKvEventsTopicAnnotation = "kvroute.io/kv-events-topic";

std::optional<fleet::KvEventSource> PodKvEvents(const boost::json::object* pod);

}  // namespace kvroute::k8s

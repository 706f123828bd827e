// EndpointSlice discovery, sans-I/O: the discovery.k8s.io/v1 EndpointSlices of one Service
// (label kubernetes.io/service-name) turned into worker membership calls on a MembershipSink —
// the alternative to following the pool's pods (pool_discovery.h) for clusters where the
// Service's endpoints, not pod readiness, are the truth (an endpoint controller that accounts
// for more than the Ready condition, dual-stack, or RBAC that grants slices but not pods).
// PoolWatcher (pool_watcher.h) lists and watches; unit tests feed it API-shaped JSON.
//
// Membership rules (one worker per endpoint × the pool's target ports that the slice lists —
// all of the pool's ports when the slice lists none —, named "<targetRef.name>:<port>" for a
// Pod target, else "<address>:<port>"; base URL http://<addresses[0]>:<port>):
//   ready                 conditions.ready true (unset counts as true, as the API says) and not
//                         terminating → joined
//   terminating           conditions.terminating true, serving or not → drained at once, the
//                         same t = 0 as a pod's deletionTimestamp; one way: it never rejoins
//   neither               (not ready, not terminating) → left; joins again when ready
//   gone                  removed from its slice, the slice deleted, or absent from a relist
//                         → left
// An endpoint is a member if any slice holds it: one moving between slices (the controller
// rebalancing) causes no leave and join. A new address → left and joined again.
//
// KV events: a slice carries no pod spec, so where the pool has one target port and the
// endpoint's targetRef is a Pod, the joining worker's KV-event endpoint comes from
// `pod_kv_events` (PoolWatcher GETs the Pod and reads it with PodKvEvents: the annotation or
// vLLM's --kv-events-config args, pod_kv_events.h), asked once per join; nullopt, or no lookup:
// the worker joins without events (routing predictions only).
//
// Thread safety: none; one watcher thread owns a reconciler.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fleet/worker_spec.h"
#include "k8s/pool_discovery.h"

namespace boost::json {
class object;
}

namespace kvroute::k8s {

inline constexpr std::string_view kServiceNameLabel = "kubernetes.io/service-name";

// A pod's KV-event endpoint by the pod's name (PoolWatcher: GET the Pod, PodKvEvents).
using PodKvEventsLookup = std::function<std::optional<fleet::KvEventSource>(const std::string& pod)>;

class SliceReconciler final : public WatchReconciler {
 public:
  // `pool` gives the target ports and names the pool in worker labels; `service` the slices'
  // kubernetes.io/service-name. `sink` is borrowed; `pod_kv_events` may be null.
  SliceReconciler(PoolSpec pool, std::string service, std::vector<std::string> models, MembershipSink* sink,
                  PodKvEventsLookup pod_kv_events = nullptr);

  // An EndpointSliceList body.
  std::expected<std::string, std::string> ApplyList(std::string_view body) override;
  Event ApplyEvent(std::string_view line) override;
  const std::string& resource_version() const override { return resource_version_; }
  std::vector<std::string> Members() const override;

 private:
  // What one slice says about one worker (endpoint × port).
  struct Endpoint {
    std::string url;
    std::string pod;  // targetRef.name when it is a Pod, else ""
    bool ready = false;
    bool terminating = false;
  };
  using SliceEndpoints = std::map<std::string, Endpoint>;  // by worker name
  struct Member {
    std::string url;
    bool draining = false;
  };

  // The slice's endpoints, or nullopt when it is not one of this Service's.
  std::optional<SliceEndpoints> ReadSlice(const boost::json::object* slice) const;
  // Brings members_ to what slices_ say, with the calls that takes.
  void Reconcile();

  PoolSpec pool_;
  std::string service_;
  std::vector<std::string> models_;
  MembershipSink* sink_;
  PodKvEventsLookup pod_kv_events_;
  std::map<std::string, SliceEndpoints> slices_;  // by slice name
  std::map<std::string, Member> members_;         // joined workers by name
  std::string resource_version_;
};

}  // namespace kvroute::k8s

// InferencePool discovery, sans-I/O: the pool object (InferencePool, group
// inference.networking.k8s.io/v1: selector, target ports, endpointPickerRef.failureMode) and a
// reconciler that turns the Kubernetes API's pod list and watch events into worker membership
// calls — join, drain, leave — on a MembershipSink (in kvroute serve: gateway::Gateway's
// JoinWorker/DrainWorker/LeaveWorker). The HTTP side (list + watch, resourceVersion, 410 Gone,
// resumption) is pool_watcher.h. No API server runs where this is tested: unit tests feed it
// JSON in the API's shapes, and tests/integration/k8s replays recorded-shape responses.
//
// Membership rules (one worker per pod × target port, named "<pod>:<port>", base URL
// http://<podIP>:<port>):
//   ready         status.podIP set, condition Ready=True, no deletionTimestamp → joined
//   terminating   deletionTimestamp set → drained at once (no new requests: the t = 0 of the
//                 drain timeline; in-flight ones finish during preStop + the engine's shutdown
//                 timeout), left when the pod is deleted
//   not ready     (alive, not terminating) → left; joins again when ready
//   deleted, or gone from a relist, or labels no longer match → left
//   a new pod IP, or new P/D annotations (k8s/pod_pd.h) → left and joined again
//   malformed P/D annotations → left (if joined) and not joined: MembershipSink::Rejected
//
// Thread safety: none; one watcher thread owns a reconciler.
#pragma once

#include <expected>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fleet/worker_spec.h"
#include "k8s/pod_pd.h"

namespace kvroute::k8s {

struct PoolSpec {
  std::string name;
  std::string namespace_name;
  std::map<std::string, std::string> selector;  // spec.selector.matchLabels
  std::vector<int> target_ports;                // spec.targetPorts[].number, 1..8
  std::string app_protocol = "http";
  // spec.endpointPickerRef.failureMode as written; nullopt: unset, which means FailClose.
  std::optional<std::string> failure_mode;
  std::string picker_service;  // endpointPickerRef.name
  int picker_port = 0;         // endpointPickerRef.port.number

  std::string EffectiveFailureMode() const { return failure_mode.value_or("FailClose"); }
};

// An InferencePool object (JSON, as GET returns it). Errors name the field.
std::expected<PoolSpec, std::string> ParseInferencePool(std::string_view json);

// "k1=v1,k2=v2" (sorted by key), the labelSelector query value before URL encoding.
std::string LabelSelector(const std::map<std::string, std::string>& labels);

// Receives membership changes. kvroute serve's implementation is the gateway's; tests record.
class MembershipSink {
 public:
  virtual ~MembershipSink() = default;
  virtual std::expected<void, std::string> JoinWorker(fleet::WorkerSpec spec) = 0;
  virtual bool DrainWorker(std::string_view name) = 0;
  virtual bool LeaveWorker(std::string_view name) = 0;
  // A pod that would join but cannot, and why (a malformed kvroute.io/* annotation,
  // k8s/pod_pd.h); it stays out until it changes. kvroute serve logs a warning.
  virtual void Rejected(std::string_view name, const std::string& why) {
    (void)name;
    (void)why;
  }
};

// What PoolWatcher drives, whatever the watched collection (pods: PoolReconciler; EndpointSlices:
// SliceReconciler, slice_discovery.h): a list body sets the members, watch lines change them,
// and resource_version() is where the next watch resumes. One thread.
class WatchReconciler {
 public:
  virtual ~WatchReconciler() = default;

  // A list body (PodList, EndpointSliceList): members become exactly what it holds; returns the
  // list's metadata.resourceVersion (where the watch starts).
  virtual std::expected<std::string, std::string> ApplyList(std::string_view body) = 0;

  enum class Event {
    kApplied,   // ADDED / MODIFIED / DELETED
    kBookmark,  // only the resourceVersion moved
    kGone,      // ERROR 410 (Expired): the history is gone, list again
    kError,     // another ERROR, or a line that is not an event: watch again
  };
  // One line of a watch stream. Advances resource_version() on every event that carries one.
  virtual Event ApplyEvent(std::string_view line) = 0;

  virtual const std::string& resource_version() const = 0;
  // Worker names currently joined (draining ones included), sorted.
  virtual std::vector<std::string> Members() const = 0;
};

class PoolReconciler final : public WatchReconciler {
 public:
  // `models`: the model names each joined worker serves (fleet::WorkerSpec needs one; the
  // gateway's catalog learns the rest from /v1/models). `sink` is borrowed.
  PoolReconciler(PoolSpec pool, std::vector<std::string> models, MembershipSink* sink);

  // A PodList body: members become exactly its ready pods.
  std::expected<std::string, std::string> ApplyList(std::string_view body) override;
  Event ApplyEvent(std::string_view line) override;
  const std::string& resource_version() const override { return resource_version_; }
  std::vector<std::string> Members() const override;
  const PoolSpec& pool() const { return pool_; }

 private:
  struct PodState {
    std::string ip;
    bool draining = false;
    PodPd pd;  // what it joined with: a change of role, tp or link joins it again
  };
  struct PodView;
  void Apply(const PodView& pod);
  void Leave(const std::string& pod);

  PoolSpec pool_;
  std::vector<std::string> models_;
  MembershipSink* sink_;
  std::map<std::string, PodState> pods_;  // joined pods by name
  std::string resource_version_;
};

}  // namespace kvroute::k8s

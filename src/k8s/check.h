// `kvroute config check --k8s`: rules over rendered manifests that catch the deployment traps
// llm-d's operators report, each finding naming the object and the field. Pure: objects in,
// findings out; no Kubernetes API server is contacted (none runs where this is tested).
//
// Rules (rule ids appear in the output):
//   drain          terminationGracePeriodSeconds >= preStop sleep + shutdown timeout + teardown
//                  buffer, per container: vLLM's --shutdown-timeout, kvroute's --drain-timeout
//                  (or drain_timeout_s of its mounted config, default 30) plus its config's
//                  shutdown_grace_s (default 1: /ready fails before the listener closes). Unset grace is 30 s
//                  (Kubernetes' default). A vLLM without --shutdown-timeout is a warning: it
//                  aborts in-flight requests at SIGTERM.
//   failure-mode   an InferencePool's endpointPickerRef (v1; extensionRef in v1alpha2) without
//                  an explicit failureMode: unset means FailClose.
//   floating       container images without a tag or digest, or tagged latest/main/master/
//                  nightly/dev/edge/stable, *latest*, or a bare major (v0, 1); helm.sh/chart
//                  and app.kubernetes.io/version labels, HelmRelease/HelmChart versions, alike.
//   kv-events      a kvroute picker in precise mode (its config's `mode`, default precise)
//                  and a model server it routes to (selected by an InferencePool, or every vLLM
//                  pod when there is no pool) without --kv-events-config enabling events.
//   selector       an InferencePool's, Service's or workload's matchLabels that match no pod
//                  template in the same namespace (matchExpressions are not evaluated).
//   config         a `kvroute serve` container whose mounted configuration, with the flags
//                  the container passes, `kvroute serve` would refuse (unknown keys, bad
//                  values, a flag it does not know). Needs CheckOptions::validate_serve_config;
//                  `kvroute config check --k8s` sets it to serve's own parse + flags + validate.
//
// Thread safety: pure functions; safe from any thread.
#pragma once

#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "k8s/manifest.h"

namespace kvroute::k8s {

enum class Severity { kError, kWarning };

struct Finding {
  Severity severity = Severity::kError;
  std::string rule;    // drain | failure-mode | floating | kv-events | selector | config
  std::string object;  // "StatefulSet/vllm"
  std::string source;  // "deploy/base/model-server.yaml#2"
  std::string field;   // "spec.template.spec.terminationGracePeriodSeconds"
  std::string message;
};

struct CheckOptions {
  // Seconds left after the shutdown timeout for the process to exit (flush, close sockets)
  // before SIGKILL. llm-d's graceful-shutdown guide budgets 15 s.
  int teardown_buffer_s = 15;
  // The `config` rule's judge: the YAML text a kvroute container mounts and its arguments
  // after `serve`; returns why serve would refuse them, or nullopt. Injected because the
  // gateway's configuration code depends on this module, not the other way round. Unset: the
  // rule is skipped.
  std::function<std::optional<std::string>(const std::string& yaml, const std::vector<std::string>& serve_args)>
      validate_serve_config;
};

std::vector<Finding> CheckManifests(const std::vector<Object>& objects, const CheckOptions& options);

// "error [drain] StatefulSet/vllm (a.yaml#2) spec.…: message"
std::string FormatFinding(const Finding& f);

// `kvroute config check --k8s PATH`: loads PATH (see LoadManifests), prints every finding and a
// summary line to `out`, a load error to `err`. Returns the exit status: 2 when loading failed
// or any finding is an error, else 0 (warnings alone pass).
int RunCheck(const std::string& path, const CheckOptions& options, std::ostream& out, std::ostream& err);

}  // namespace kvroute::k8s

// EppPolicy: what the picker's objectives and model rewrites are, merged from the config and
// the cluster — `epp.objectives` (name → priority) and the InferencePool's InferenceObjective and
// InferenceModelRewrite objects (k8s/objective_discovery.h; it is their ServingObjectSink).
//
// Priority of an objective name: the cluster's InferenceObjective of that name (group llm-d.ai
// before inference.networking.x-k8s.io when both carry one), else `epp.objectives`, else 0 —
// objects override the config entry of the same name and add names it lacks.
//
// Model rewrite of a request's model (RewriteFor): the rules of every InferenceModelRewrite
// of the pool, ordered oldest object first (metadata.creationTimestamp, then name, then rule
// order: the API's "oldest wins"; an object name carried by both groups counts once, from
// llm-d.ai); the first rule matching the model exactly applies, else the first rule with an
// empty `matches` (which the API defines as a catch-all for models no rule matched), else none.
// Among the rule's targets the choice is weighted and deterministic per request: with W the
// sum of the weights, the point key mod W falls in one target's range (targets in the rule's
// order, each weight wide). The picker's key is a 64-bit FNV-1a hash of x-request-id, or its
// own request counter when the header is absent (the split then holds over consecutive
// requests instead).
//
// Thread safety: every method may be called from any thread (the watchers write, the streams
// read); reads take a shared lock.
#pragma once

#include <cstdint>
#include <map>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "k8s/objective_discovery.h"

namespace kvroute::extproc {

class EppPolicy final : public k8s::ServingObjectSink {
 public:
  explicit EppPolicy(std::map<std::string, int> configured = {});

  int Priority(std::string_view objective) const;
  // The target model for `model` and request `key`; "" when no rule applies.
  std::string RewriteFor(std::string_view model, std::uint64_t key) const;

  void SetObjectives(std::string_view group, std::vector<k8s::Objective> objectives) override;
  void SetRewrites(std::string_view group, std::vector<k8s::RewriteRule> rules) override;

 private:
  void Rebuild();  // REQUIRES: mu_ held exclusively

  mutable std::shared_mutex mu_;
  const std::map<std::string, int, std::less<>> configured_;
  // Guarded by mu_: by group, as the watchers gave them.
  std::map<std::string, std::map<std::string, int, std::less<>>> objectives_;
  std::map<std::string, std::vector<k8s::RewriteRule>> rewrites_;
  // Guarded by mu_: derived by Rebuild.
  std::map<std::string, int, std::less<>> priority_;  // the merged answer
  std::vector<k8s::RewriteRule> rules_;                // in precedence order
};

// 64-bit FNV-1a: a stable hash of a request id (the same on every replica and build).
std::uint64_t StableHash(std::string_view s);

}  // namespace kvroute::extproc

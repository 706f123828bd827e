// InferenceObjective and InferenceModelRewrite discovery, sans-I/O: the Inference Extension's
// request-level objects of one InferencePool (reference §6; group `llm-d.ai`, formerly
// `inference.networking.x-k8s.io`, version v1alpha2) read from the API's list and watch JSON
// and handed, as the whole current set of one group, to a ServingObjectSink (in kvroute serve
// --epp: extproc::EppPolicy). objective_watcher.h lists and watches them; unit tests feed
// API-shaped JSON. No API server runs where this is tested.
//
// What is read (everything else is ignored):
//   InferenceObjective     metadata.name → spec.priority (an integer, higher = more critical;
//                          unset = 0, as the CRD says)
//   InferenceModelRewrite  spec.rules[] in order: matches[].model.value (type Exact, the only
//                          one the API defines; an empty `matches` matches every model) →
//                          targets[] {modelRewrite, weight 1..1e6; unset = 1}; plus the
//                          object's name and metadata.creationTimestamp, which order rules of
//                          different objects (the oldest object's rule wins, as the API says)
// Either kind counts only when spec.poolRef names this pool (poolRef.name; a kind other than
// InferencePool is another pool). An object that stops matching, or whose poolRef moves
// elsewhere, or that is deleted, leaves the set. A rule without targets is dropped.
//
// Thread safety: none; one watcher thread owns a reconciler. The sink is called on it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "k8s/pool_discovery.h"

namespace kvroute::k8s {

inline constexpr std::string_view kLlmdGroup = "llm-d.ai";
inline constexpr std::string_view kLegacyObjectiveGroup = "inference.networking.x-k8s.io";
inline constexpr std::string_view kObjectiveVersion = "v1alpha2";

struct Objective {
  std::string name;
  int priority = 0;
};

struct RewriteTarget {
  std::string model;
  std::int64_t weight = 1;  // > 0
};

struct RewriteRule {
  std::string object;   // the InferenceModelRewrite's name
  std::string created;  // its metadata.creationTimestamp (RFC 3339 UTC: orders as text)
  int index = 0;        // the rule's position in spec.rules
  std::vector<std::string> models;  // exact model names matched; empty: every model
  std::vector<RewriteTarget> targets;  // non-empty
};

// Receives the current objects of one API group; each call replaces that group's previous set.
// Objectives and rules come by object name (rules of one object in their order); precedence
// across objects is the receiver's to apply (creationTimestamp is on each rule).
class ServingObjectSink {
 public:
  virtual ~ServingObjectSink() = default;
  virtual void SetObjectives(std::string_view group, std::vector<Objective> objectives) = 0;
  virtual void SetRewrites(std::string_view group, std::vector<RewriteRule> rules) = 0;
};

enum class ServingKind { kObjective, kModelRewrite };
// "inferenceobjectives", "inferencemodelrewrites": the collection's path segment.
std::string_view PluralOf(ServingKind kind);

class ServingObjectReconciler final : public WatchReconciler {
 public:
  // `group`: the API group this reconciler's collection is served under (passed to the sink);
  // `pool`: the InferencePool's name poolRef must carry. `sink` is borrowed.
  ServingObjectReconciler(ServingKind kind, std::string group, std::string pool, ServingObjectSink* sink);

  // An InferenceObjectiveList / InferenceModelRewriteList body.
  std::expected<std::string, std::string> ApplyList(std::string_view body) override;
  Event ApplyEvent(std::string_view line) override;
  const std::string& resource_version() const override { return resource_version_; }
  // Names of the objects that count (they name this pool), sorted.
  std::vector<std::string> Members() const override;

 private:
  // One object's contribution (an objective, or the rules of a rewrite).
  struct Entry {
    Objective objective;
    std::vector<RewriteRule> rules;
  };
  void Publish() const;

  ServingKind kind_;
  std::string group_;
  std::string pool_;
  ServingObjectSink* sink_;
  std::map<std::string, Entry> objects_;  // by metadata.name, only those naming this pool
  std::string resource_version_;
};

}  // namespace kvroute::k8s

// Registry: plug-in factories by name, and the YAML → Policy builder with built-in presets.
//
// Policy YAML (the `scheduler.policy` section of kvroute's configuration, or a whole file):
//
//   preset: predicted_latency        # a built-in policy; exclusive with the keys below
// or
//   name: my_policy                  # optional, default "custom"
//   filters:                         # run in this order
//     - name: healthy
//     - name: itl_guard
//       if_all_dropped: keep_all     # fail | keep_all; default per filter (FilterDefaults)
//       itl_slo_s: 0.05              # filter options
//   scorers:                         # at least one unless the picker ignores costs
//     - name: predicted_ttft
//       weight: 1.0                  # finite, >= 0; default 1
//   picker:
//     name: softmax                  # argmin | softmax | random | round_robin
//     temperature: 0.1
//
// Every key is validated; an error names its path ("scorers[1].wieght: unknown key").
// Built-in presets (BuiltinPolicyYaml prints each one): round_robin, random, least_load,
// approx_prefix, dynamo_cost, llmd_sticky, predicted_latency (kvroute's default).
//
// Thread safety: a Registry is filled at start-up, then only read; reads are thread-safe.
// The built-in registry (Registry::Builtin) is immutable.
#pragma once

#include <expected>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sched/params.h"
#include "sched/policy.h"

namespace kvroute::sched {

class Registry {
 public:
  using FilterFactory =
      std::function<std::expected<std::shared_ptr<const Filter>, ConfigError>(Params&)>;
  using ScorerFactory =
      std::function<std::expected<std::shared_ptr<const Scorer>, ConfigError>(Params&)>;
  using PickerFactory =
      std::function<std::expected<std::shared_ptr<const Picker>, ConfigError>(Params&)>;

  // The built-in plug-ins (filters.h, scorers.h, pickers.h).
  static const Registry& Builtin();

  // `default_if_all_dropped` applies when the YAML entry does not say.
  void AddFilter(std::string name, FilterFactory factory, IfAllDropped default_if_all_dropped);
  void AddScorer(std::string name, ScorerFactory factory);
  void AddPicker(std::string name, PickerFactory factory);

  // Builds a policy from YAML text / a parsed node (see the format above).
  std::expected<std::shared_ptr<const Policy>, ConfigError> ParsePolicy(
      std::string_view yaml) const;
  std::expected<std::shared_ptr<const Policy>, ConfigError> PolicyFromNode(
      const YAML::Node& node) const;

  std::vector<std::string> FilterNames() const;
  std::vector<std::string> ScorerNames() const;
  std::vector<std::string> PickerNames() const;

 private:
  struct FilterEntry {
    FilterFactory factory;
    IfAllDropped default_if_all_dropped;
  };
  std::map<std::string, FilterEntry, std::less<>> filters_;
  std::map<std::string, ScorerFactory, std::less<>> scorers_;
  std::map<std::string, PickerFactory, std::less<>> pickers_;
};

// The YAML text of a built-in preset, or an empty view for an unknown name.
std::string_view BuiltinPolicyYaml(std::string_view preset);
std::vector<std::string_view> BuiltinPolicyNames();
// Shorthand: Registry::Builtin().ParsePolicy("preset: <name>").
std::expected<std::shared_ptr<const Policy>, ConfigError> BuiltinPolicy(std::string_view preset);

}  // namespace kvroute::sched

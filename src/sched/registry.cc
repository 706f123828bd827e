#include "sched/registry.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <limits>

#include "sched/filters.h"
#include "sched/pickers.h"
#include "sched/scorers.h"

namespace kvroute::sched {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
using Unexpected = std::unexpected<ConfigError>;

Registry MakeBuiltin() {
  Registry r;
  RegisterBuiltinFilters(r);
  RegisterBuiltinScorers(r);
  RegisterBuiltinPickers(r);
  return r;
}

// Reads the mandatory `name` of a plug-in entry.
std::expected<std::string, ConfigError> EntryName(const YAML::Node& entry,
                                                  const std::string& path) {
  if (!entry.IsMap()) return Unexpected(ConfigError{path + ": expected a map with a 'name' key"});
  const YAML::Node name = entry["name"];
  if (!name.IsDefined() || !name.IsScalar() || name.Scalar().empty()) {
    return Unexpected(ConfigError{path + ".name: missing plug-in name"});
  }
  return name.Scalar();
}

// {name: <name>, <every option with its effective value>}: name first, for readability.
YAML::Node Effective(const std::string& name, const Params& p) {
  YAML::Node out(YAML::NodeType::Map);
  out["name"] = name;
  for (const auto& kv : p.Resolved()) out[kv.first] = kv.second;
  out.SetStyle(YAML::EmitterStyle::Flow);
  return out;
}

template <typename Map>
std::string Known(const Map& map) {
  std::string out;
  for (const auto& [name, unused] : map) out += (out.empty() ? "" : ", ") + name;
  return out;
}

}  // namespace

const Registry& Registry::Builtin() {
  static const Registry registry = MakeBuiltin();
  return registry;
}

void Registry::AddFilter(std::string name, FilterFactory factory, IfAllDropped rule) {
  filters_[std::move(name)] = {std::move(factory), rule};
}
void Registry::AddScorer(std::string name, ScorerFactory factory) {
  scorers_[std::move(name)] = std::move(factory);
}
void Registry::AddPicker(std::string name, PickerFactory factory) {
  pickers_[std::move(name)] = std::move(factory);
}

std::vector<std::string> Registry::FilterNames() const {
  std::vector<std::string> out;
  for (const auto& [name, unused] : filters_) out.push_back(name);
  return out;
}
std::vector<std::string> Registry::ScorerNames() const {
  std::vector<std::string> out;
  for (const auto& [name, unused] : scorers_) out.push_back(name);
  return out;
}
std::vector<std::string> Registry::PickerNames() const {
  std::vector<std::string> out;
  for (const auto& [name, unused] : pickers_) out.push_back(name);
  return out;
}

std::expected<std::shared_ptr<const Policy>, ConfigError> Registry::ParsePolicy(
    std::string_view yaml) const {
  try {
    return PolicyFromNode(YAML::Load(std::string(yaml)));
  } catch (const YAML::Exception& e) {
    // Configuration is parsed at start-up, never on the request path; yaml-cpp reports
    // syntax errors by exception, converted here.
    return Unexpected(ConfigError{fmt::format("policy: invalid YAML: {}", e.what())});
  }
}

std::expected<std::shared_ptr<const Policy>, ConfigError> Registry::PolicyFromNode(
    const YAML::Node& node) const {
  try {
    if (!node.IsMap()) return Unexpected(ConfigError{"policy: expected a map"});
    Params top(node, "policy");
    if (node["preset"].IsDefined()) {
      auto preset = top.String("preset", "");
      if (!preset) return Unexpected(preset.error());
      if (node.size() != 1) {
        return Unexpected(ConfigError{"policy.preset: cannot be combined with other keys"});
      }
      const std::string_view text = BuiltinPolicyYaml(*preset);
      if (text.empty()) {
        std::string known;
        for (std::string_view n : BuiltinPolicyNames())
          known += (known.empty() ? "" : ", ") + std::string(n);
        return Unexpected(ConfigError{
            fmt::format("policy.preset: unknown preset '{}' (known: {})", *preset, known)});
      }
      return ParsePolicy(text);
    }
    auto name = top.String("name", "custom");
    if (!name) return Unexpected(name.error());

    YAML::Node effective(YAML::NodeType::Map);
    effective["name"] = *name;
    std::vector<FilterStep> filters;
    top.Consume("filters");
    if (const YAML::Node list = node["filters"]; list.IsDefined() && !list.IsNull()) {
      if (!list.IsSequence()) return Unexpected(ConfigError{"policy.filters: expected a list"});
      for (std::size_t i = 0; i < list.size(); ++i) {
        const std::string path = fmt::format("filters[{}]", i);
        auto fname = EntryName(list[i], path);
        if (!fname) return Unexpected(fname.error());
        auto it = filters_.find(*fname);
        if (it == filters_.end()) {
          return Unexpected(ConfigError{fmt::format("{}.name: unknown filter '{}' (known: {})",
                                                    path, *fname, Known(filters_))});
        }
        Params p(list[i], path);
        p.Consume("name");
        FilterStep step{.if_all_dropped = it->second.default_if_all_dropped};
        auto rule = p.String("if_all_dropped", IfAllDroppedName(step.if_all_dropped));
        if (!rule) return Unexpected(rule.error());
        if (*rule == "fail")
          step.if_all_dropped = IfAllDropped::kFail;
        else if (*rule == "keep_all")
          step.if_all_dropped = IfAllDropped::kKeepAll;
        else
          return Unexpected(
              p.Error("if_all_dropped", fmt::format("'{}' is not fail or keep_all", *rule)));
        auto made = it->second.factory(p);
        if (!made) return Unexpected(made.error());
        if (auto ok = p.RejectUnknownKeys(); !ok) return Unexpected(ok.error());
        step.filter = std::move(*made);
        filters.push_back(std::move(step));
        effective["filters"].push_back(Effective(*fname, p));
      }
    }

    std::vector<ScorerStep> scorers;
    top.Consume("scorers");
    if (const YAML::Node list = node["scorers"]; list.IsDefined() && !list.IsNull()) {
      if (!list.IsSequence()) return Unexpected(ConfigError{"policy.scorers: expected a list"});
      for (std::size_t i = 0; i < list.size(); ++i) {
        const std::string path = fmt::format("scorers[{}]", i);
        auto sname = EntryName(list[i], path);
        if (!sname) return Unexpected(sname.error());
        auto it = scorers_.find(*sname);
        if (it == scorers_.end()) {
          return Unexpected(ConfigError{fmt::format("{}.name: unknown scorer '{}' (known: {})",
                                                    path, *sname, Known(scorers_))});
        }
        Params p(list[i], path);
        p.Consume("name");
        auto weight = p.Number("weight", 1.0, 0, kInf);
        if (!weight) return Unexpected(weight.error());
        auto made = it->second(p);
        if (!made) return Unexpected(made.error());
        if (auto ok = p.RejectUnknownKeys(); !ok) return Unexpected(ok.error());
        scorers.push_back({std::move(*made), *weight});
        effective["scorers"].push_back(Effective(*sname, p));
      }
    }

    top.Consume("picker");
    const YAML::Node picker_node = node["picker"];
    if (!picker_node.IsDefined()) return Unexpected(ConfigError{"policy.picker: missing"});
    auto pname = EntryName(picker_node, "picker");
    if (!pname) return Unexpected(pname.error());
    auto pit = pickers_.find(*pname);
    if (pit == pickers_.end()) {
      return Unexpected(ConfigError{
          fmt::format("picker.name: unknown picker '{}' (known: {})", *pname, Known(pickers_))});
    }
    Params pp(picker_node, "picker");
    pp.Consume("name");
    auto picker = pit->second(pp);
    if (!picker) return Unexpected(picker.error());
    if (auto ok = pp.RejectUnknownKeys(); !ok) return Unexpected(ok.error());
    if (auto ok = top.RejectUnknownKeys(); !ok) return Unexpected(ok.error());
    // Pickers that read costs would see all-zero totals without a scorer: a config mistake.
    if (scorers.empty() && (*pname == "argmin" || *pname == "softmax")) {
      return Unexpected(ConfigError{
          fmt::format("policy.scorers: picker '{}' needs at least one scorer", *pname)});
    }
    effective["picker"] = Effective(*pname, pp);
    YAML::Emitter emitter;
    emitter << effective;
    return std::make_shared<const Policy>(std::move(*name), std::move(filters), std::move(scorers),
                                          std::move(*picker), std::string(emitter.c_str()));
  } catch (const YAML::Exception& e) {
    return Unexpected(ConfigError{fmt::format("policy: invalid YAML: {}", e.what())});
  }
}

}  // namespace kvroute::sched

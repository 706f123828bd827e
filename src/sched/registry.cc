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

template <typename T>
using Made = std::expected<std::shared_ptr<const T>, ConfigError>;

Registry MakeBuiltin() {
  Registry r;
  r.AddFilter(
      "healthy", [](Params&) -> Made<Filter> { return NewHealthyFilter(); }, IfAllDropped::kFail);
  r.AddFilter(
      "not_draining", [](Params&) -> Made<Filter> { return NewNotDrainingFilter(); },
      IfAllDropped::kFail);
  r.AddFilter(
      "model", [](Params&) -> Made<Filter> { return NewModelFilter(); }, IfAllDropped::kFail);
  r.AddFilter(
      "role",
      [](Params& p) -> Made<Filter> {
        auto names = p.StringList("allowed");
        if (!names) return Unexpected(names.error());
        std::vector<Role> roles;
        for (const std::string& n : *names) {
          if (n == "mixed")
            roles.push_back(Role::kMixed);
          else if (n == "prefill")
            roles.push_back(Role::kPrefill);
          else if (n == "decode")
            roles.push_back(Role::kDecode);
          else
            return Unexpected(p.Error("allowed", fmt::format("unknown role '{}'", n)));
        }
        if (roles.empty()) return Unexpected(p.Error("allowed", "must list at least one role"));
        return NewRoleFilter(std::move(roles));
      },
      IfAllDropped::kFail);
  r.AddFilter(
      "prefix_affinity",
      [](Params& p) -> Made<Filter> {
        PrefixAffinityOptions o;
        auto threshold = p.Number("threshold", o.threshold, 0, 1);
        if (!threshold) return Unexpected(threshold.error());
        auto tau = p.String("tau", "fixed");
        if (!tau) return Unexpected(tau.error());
        if (*tau != "fixed" && *tau != "derived") {
          return Unexpected(p.Error("tau", "must be 'fixed' or 'derived'"));
        }
        o.threshold = *threshold;
        o.derived_tau = *tau == "derived";
        if (o.derived_tau) {
          auto chunk = p.Number("chunk_tokens", o.terms.chunk_tokens, 1, 1 << 24);
          if (!chunk) return Unexpected(chunk.error());
          o.terms.chunk_tokens = static_cast<std::uint32_t>(*chunk);
          auto rivals = p.String("rivals", "idle");
          if (!rivals) return Unexpected(rivals.error());
          if (*rivals != "idle" && *rivals != "no_prefill_queue") {
            return Unexpected(p.Error("rivals", "must be 'idle' or 'no_prefill_queue'"));
          }
          o.rivals = *rivals == "idle" ? PrefixAffinityOptions::Rivals::kIdle
                                       : PrefixAffinityOptions::Rivals::kNoPrefillQueue;
        } else {
          auto penalty = p.Number("max_ttft_penalty_s", o.max_ttft_penalty_s, 0, kInf);
          if (!penalty) return Unexpected(penalty.error());
          o.max_ttft_penalty_s = *penalty;
        }
        return NewPrefixAffinityFilter(o);
      },
      IfAllDropped::kKeepAll);
  r.AddFilter(
      "itl_guard",
      [](Params& p) -> Made<Filter> {
        ItlGuardOptions o;
        auto slo = p.Number("itl_slo_s", o.itl_slo_s, 0, kInf);
        if (!slo) return Unexpected(slo.error());
        auto holder = p.Number("holder_threshold", o.holder_threshold, 0, kInf);
        if (!holder) return Unexpected(holder.error());
        auto factor = p.Number("holder_max_itl_factor", o.holder_max_itl_factor, 1, kInf);
        if (!factor) return Unexpected(factor.error());
        o.itl_slo_s = *slo;
        o.holder_threshold = *holder;
        o.holder_max_itl_factor = *factor;
        return NewItlGuardFilter(o);
      },
      IfAllDropped::kKeepAll);

  r.AddScorer("inflight_requests",
              [](Params&) -> Made<Scorer> { return NewInflightRequestsScorer(); });
  r.AddScorer("inflight_normalized",
              [](Params&) -> Made<Scorer> { return NewInflightNormalizedScorer(); });
  r.AddScorer("engine_queue", [](Params&) -> Made<Scorer> { return NewEngineQueueScorer(); });
  r.AddScorer("kv_usage", [](Params&) -> Made<Scorer> { return NewKvUsageScorer(); });
  r.AddScorer("prefix_miss", [](Params&) -> Made<Scorer> { return NewPrefixMissScorer(); });
  r.AddScorer("predicted_ttft", [](Params& p) -> Made<Scorer> {
    TtftTerms t = kFullTtftModel;
    auto decode = p.Number("decode_load", t.decode_load, 0, kInf);
    if (!decode) return Unexpected(decode.error());
    auto kv = p.Number("kv_wait", t.kv_wait, 0, kInf);
    if (!kv) return Unexpected(kv.error());
    auto chunk = p.Number("chunk_tokens", t.chunk_tokens, 1, 1 << 24);
    if (!chunk) return Unexpected(chunk.error());
    t.decode_load = *decode;
    t.kv_wait = *kv;
    t.chunk_tokens = static_cast<std::uint32_t>(*chunk);
    return NewPredictedTtftScorer(t);
  });
  r.AddScorer("decode_slowdown", [](Params& p) -> Made<Scorer> {
    SlowdownTerms t;
    auto others = p.Number("others_share", t.others_share, 0, 1);
    if (!others) return Unexpected(others.error());
    auto stall = p.Number("stall", t.stall, 0, kInf);
    if (!stall) return Unexpected(stall.error());
    t.others_share = *others;
    t.stall = *stall;
    return NewDecodeSlowdownScorer(t);
  });
  r.AddScorer("token_load", [](Params& p) -> Made<Scorer> {
    TokenLoadOptions o;
    auto limit = p.Number("token_limit", o.token_limit, 1, kInf);
    if (!limit) return Unexpected(limit.error());
    o.token_limit = *limit;
    return NewTokenLoadScorer(o);
  });
  r.AddScorer("dynamo_cost", [](Params& p) -> Made<Scorer> {
    DynamoCostOptions o;
    for (auto [key, field] :
         {std::pair{"prefill_load_scale", &o.prefill_load_scale},
          std::pair{"host_weight", &o.host_weight}, std::pair{"disk_weight", &o.disk_weight},
          std::pair{"shared_weight", &o.shared_weight},
          std::pair{"active_request_weight", &o.active_request_weight}}) {
      auto v = p.Number(key, *field, 0, kInf);
      if (!v) return Unexpected(v.error());
      *field = *v;
    }
    return NewDynamoCostScorer(o);
  });

  r.AddPicker("argmin", [](Params&) -> Made<Picker> { return NewArgminPicker(); });
  r.AddPicker("random", [](Params&) -> Made<Picker> { return NewRandomPicker(); });
  r.AddPicker("round_robin", [](Params&) -> Made<Picker> { return NewRoundRobinPicker(); });
  r.AddPicker("softmax", [](Params& p) -> Made<Picker> {
    auto t = p.Number("temperature", 0.0, 0, kInf);
    if (!t) return Unexpected(t.error());
    return NewSoftmaxPicker(*t);
  });
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

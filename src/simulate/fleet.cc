#include "simulate/fleet.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>

namespace kvroute::simulate {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::expected<std::int64_t, std::string> ParseInt(std::string_view text, std::string_view what) {
  text = Trim(text);
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || v < 0) {
    return std::unexpected(std::string(what) + ": expected a non-negative integer, got '" +
                           std::string(text) + "'");
  }
  return v;
}

std::expected<WorkerSpec, std::string> SpecWithProfile(const WorkerSpec& base,
                                                       std::string_view profile) {
  WorkerSpec spec = base;
  if (profile.empty() || profile == base.profile.name) return spec;
  auto p = engine::LoadProfile(profile);
  if (!p) return std::unexpected(p.error());
  spec.profile = std::move(*p);
  return spec;
}

// Applies the `engine:` overrides of one fleet entry.
std::expected<void, std::string> ApplyEngineNode(const YAML::Node& node, const std::string& path,
                                                 engine::EngineConfig* c) {
  if (!node) return {};
  if (!node.IsMap()) return std::unexpected(path + ": expected a map");
  for (const auto& kv : node) {
    const auto key = kv.first.as<std::string>();
    const YAML::Node& v = kv.second;
    if (key == "max_num_seqs") {
      c->max_num_seqs = v.as<std::uint32_t>();
    } else if (key == "max_num_batched_tokens") {
      c->max_num_batched_tokens = v.as<std::uint32_t>();
    } else if (key == "num_gpu_blocks") {
      c->num_gpu_blocks_override = v.as<std::int64_t>();
    } else if (key == "num_cpu_blocks") {
      c->num_cpu_blocks = v.as<std::int64_t>();
    } else if (key == "block_size") {
      c->block_size = v.as<std::uint32_t>();
    } else if (key == "enable_chunked_prefill") {
      c->enable_chunked_prefill = v.as<bool>();
    } else if (key == "enable_prefix_caching") {
      c->enable_prefix_caching = v.as<bool>();
    } else if (key == "cpu_to_gpu_bandwidth_bytes_per_s") {
      c->cpu_to_gpu_bandwidth_bytes_per_s = v.as<double>();
    } else {
      return std::unexpected(path + "." + key + ": unknown key");
    }
  }
  return {};
}

std::expected<FleetChange, std::string> ChangeFromNode(const YAML::Node& node,
                                                       const std::string& path,
                                                       const WorkerSpec& base) {
  if (!node.IsMap()) return std::unexpected(path + ": expected a map");
  FleetChange change;
  bool has_time = false, has_kind = false;
  std::string profile;
  YAML::Node engine_node;
  bool has_engine = false;
  for (const auto& kv : node) {
    const auto key = kv.first.as<std::string>();
    if (key == "t") {
      auto t = ParseDuration(kv.second.as<std::string>());
      if (!t) return std::unexpected(path + ".t: " + t.error());
      change.at = *t;
      has_time = true;
    } else if (key == "fail" || key == "restart") {
      change.kind = key == "fail" ? FleetChange::Kind::kFail : FleetChange::Kind::kRestart;
      change.worker = kv.second.as<WorkerId>();
      has_kind = true;
    } else if (key == "add") {
      change.kind = FleetChange::Kind::kAdd;
      change.count = kv.second.as<int>();
      has_kind = true;
    } else if (key == "profile") {
      profile = kv.second.as<std::string>();
    } else if (key == "engine") {
      engine_node = kv.second;
      has_engine = true;
    } else {
      return std::unexpected(path + "." + key + ": unknown key");
    }
  }
  if (!has_time) return std::unexpected(path + ": missing t");
  if (!has_kind) return std::unexpected(path + ": needs one of fail, restart, add");
  if (change.kind == FleetChange::Kind::kAdd) {
    if (change.count <= 0) return std::unexpected(path + ".add: must be > 0");
    auto spec = SpecWithProfile(base, profile);
    if (!spec) return std::unexpected(path + ".profile: " + spec.error());
    if (has_engine) {
      if (auto ok = ApplyEngineNode(engine_node, path + ".engine", &spec->config); !ok) {
        return std::unexpected(ok.error());
      }
    }
    change.spec = std::move(*spec);
  } else if (!profile.empty() || has_engine) {
    return std::unexpected(path + ": profile/engine only apply to add");
  }
  return change;
}

}  // namespace

const char* FleetChangeKindName(FleetChange::Kind kind) {
  switch (kind) {
    case FleetChange::Kind::kFail:
      return "fail";
    case FleetChange::Kind::kRestart:
      return "restart";
    case FleetChange::Kind::kAdd:
      return "add";
  }
  return "?";
}

std::expected<FleetChange, std::string> ParseChangeFlag(FleetChange::Kind kind,
                                                        std::string_view text,
                                                        const WorkerSpec& base) {
  FleetChange change;
  change.kind = kind;
  bool has_time = false, has_target = false;
  std::string profile;
  const std::string where =
      std::string("--") + FleetChangeKindName(kind) + " '" + std::string(text) + "'";
  while (!text.empty()) {
    const auto comma = text.find(',');
    const std::string_view item = Trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    const auto eq = item.find('=');
    if (eq == std::string_view::npos) return std::unexpected(where + ": expected key=value");
    const std::string_view key = Trim(item.substr(0, eq));
    const std::string_view value = Trim(item.substr(eq + 1));
    if (key == "t") {
      auto t = ParseDuration(value);
      if (!t) return std::unexpected(where + ": " + t.error());
      change.at = *t;
      has_time = true;
    } else if (key == "worker" && kind != FleetChange::Kind::kAdd) {
      auto w = ParseInt(value, "worker");
      if (!w) return std::unexpected(where + ": " + w.error());
      change.worker = static_cast<WorkerId>(*w);
      has_target = true;
    } else if (key == "count" && kind == FleetChange::Kind::kAdd) {
      auto n = ParseInt(value, "count");
      if (!n || *n == 0) return std::unexpected(where + ": count must be > 0");
      change.count = static_cast<int>(*n);
      has_target = true;
    } else if (key == "profile" && kind == FleetChange::Kind::kAdd) {
      profile = std::string(value);
    } else {
      return std::unexpected(where + ": unknown key '" + std::string(key) + "'");
    }
  }
  if (!has_time) return std::unexpected(where + ": missing t=");
  if (!has_target) {
    return std::unexpected(
        where + (kind == FleetChange::Kind::kAdd ? ": missing count=" : ": missing worker="));
  }
  if (kind == FleetChange::Kind::kAdd) {
    auto spec = SpecWithProfile(base, profile);
    if (!spec) return std::unexpected(where + ": " + spec.error());
    change.spec = std::move(*spec);
  }
  return change;
}

std::expected<Fleet, std::string> ParseFleetYaml(std::string_view yaml, const WorkerSpec& base) {
  Fleet fleet;
  try {
    const YAML::Node root = YAML::Load(std::string(yaml));
    if (!root.IsMap()) return std::unexpected("fleet file: expected a map with fleet:");
    for (const auto& kv : root) {
      const auto key = kv.first.as<std::string>();
      if (key != "fleet" && key != "changes") {
        return std::unexpected(key + ": unknown key (fleet, changes)");
      }
    }
    const YAML::Node entries = root["fleet"];
    if (!entries || !entries.IsSequence()) return std::unexpected("fleet: expected a list");
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const std::string path = "fleet[" + std::to_string(i) + "]";
      const YAML::Node& e = entries[i];
      if (!e.IsMap()) return std::unexpected(path + ": expected a map");
      int count = 1;
      std::string profile, role = "mixed", link;
      std::uint32_t tp = 0, gpus = 0;
      for (const auto& kv : e) {
        const auto key = kv.first.as<std::string>();
        if (key == "count") {
          count = kv.second.as<int>();
        } else if (key == "profile") {
          profile = kv.second.as<std::string>();
        } else if (key == "role") {
          role = kv.second.as<std::string>();
        } else if (key == "link") {
          link = kv.second.as<std::string>();
        } else if (key == "tp") {
          tp = kv.second.as<std::uint32_t>();
        } else if (key == "gpus") {
          gpus = kv.second.as<std::uint32_t>();
        } else if (key != "engine") {
          return std::unexpected(path + "." + key + ": unknown key");
        }
      }
      if (count <= 0) return std::unexpected(path + ".count: must be > 0");
      auto spec = SpecWithProfile(base, profile);
      if (!spec) return std::unexpected(path + ".profile: " + spec.error());
      if (role == "mixed") {
        spec->role = sched::Role::kMixed;
      } else if (role == "prefill") {
        spec->role = sched::Role::kPrefill;
      } else if (role == "decode") {
        spec->role = sched::Role::kDecode;
      } else {
        return std::unexpected(path + ".role: '" + role + "' is not one of mixed, prefill, decode");
      }
      // The engine model's TP is its profile's: a different tp would describe another engine.
      if (tp != 0 && tp != spec->profile.hardware.num_gpus) {
        return std::unexpected(path + ".tp: " + std::to_string(tp) + " but profile " +
                               spec->profile.name + " is TP" +
                               std::to_string(spec->profile.hardware.num_gpus));
      }
      if (gpus != 0 && gpus < spec->profile.hardware.num_gpus) {
        return std::unexpected(path + ".gpus: must be >= tp");
      }
      spec->gpus = gpus;
      if (!link.empty()) {
        if (spec->profile.FindLink(link) == nullptr) {
          return std::unexpected(path + ".link: '" + link + "' is not a link of profile " +
                                 spec->profile.name);
        }
        spec->config.kv_link = engine::LinkSpec{};
        spec->config.kv_link.name = link;
      }
      if (auto ok = ApplyEngineNode(e["engine"], path + ".engine", &spec->config); !ok) {
        return std::unexpected(ok.error());
      }
      for (int k = 0; k < count; ++k) fleet.workers.push_back(*spec);
    }
    if (const YAML::Node changes = root["changes"]) {
      if (!changes.IsSequence()) return std::unexpected("changes: expected a list");
      for (std::size_t i = 0; i < changes.size(); ++i) {
        auto c = ChangeFromNode(changes[i], "changes[" + std::to_string(i) + "]", base);
        if (!c) return std::unexpected(c.error());
        fleet.changes.push_back(std::move(*c));
      }
    }
  } catch (const YAML::Exception& e) {
    return std::unexpected(std::string("fleet file: ") + e.what());
  }
  SortChanges(&fleet);
  return fleet;
}

void SortChanges(Fleet* fleet) {
  std::stable_sort(fleet->changes.begin(), fleet->changes.end(),
                   [](const FleetChange& x, const FleetChange& y) { return x.at < y.at; });
}

std::expected<void, std::string> ValidateFleet(const Fleet& fleet) {
  if (fleet.workers.empty()) return std::unexpected("the fleet has no workers");
  const std::uint32_t bs = fleet.workers.front().config.block_size;
  auto check_bs = [bs](const WorkerSpec& s) { return s.config.block_size == bs; };
  if (!std::all_of(fleet.workers.begin(), fleet.workers.end(), check_bs)) {
    return std::unexpected("every worker must use the same block_size (the router keys once)");
  }
  std::size_t known = fleet.workers.size();
  for (const FleetChange& c : fleet.changes) {
    if (c.kind == FleetChange::Kind::kAdd) {
      if (!check_bs(c.spec))
        return std::unexpected("added workers must use the fleet's block_size");
      known += static_cast<std::size_t>(c.count);
    } else if (c.worker >= known) {
      return std::unexpected(std::string(FleetChangeKindName(c.kind)) + " of worker " +
                             std::to_string(c.worker) + ": no such worker at that time");
    }
  }
  return {};
}

}  // namespace kvroute::simulate

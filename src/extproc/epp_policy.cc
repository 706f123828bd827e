#include "extproc/epp_policy.h"

#include <algorithm>
#include <mutex>
#include <tuple>

namespace kvroute::extproc {
namespace {

// Groups in precedence order: the current one first.
int GroupRank(std::string_view group) { return group == k8s::kLlmdGroup ? 0 : 1; }

}  // namespace

std::uint64_t StableHash(std::string_view s) {
  std::uint64_t h = 14695981039346656037ull;  // the FNV-1a offset basis
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

EppPolicy::EppPolicy(std::map<std::string, int> configured)
    : configured_(configured.begin(), configured.end()), priority_(configured_) {}

int EppPolicy::Priority(std::string_view objective) const {
  std::shared_lock lock(mu_);
  auto it = priority_.find(objective);
  return it == priority_.end() ? 0 : it->second;
}

std::string EppPolicy::RewriteFor(std::string_view model, std::uint64_t key) const {
  std::shared_lock lock(mu_);
  const k8s::RewriteRule* rule = nullptr;
  for (const auto& r : rules_) {
    if (std::find(r.models.begin(), r.models.end(), model) != r.models.end()) {
      rule = &r;
      break;
    }
  }
  if (!rule) {
    for (const auto& r : rules_) {
      if (r.models.empty()) {
        rule = &r;
        break;
      }
    }
  }
  if (!rule) return {};
  std::uint64_t total = 0;
  for (const auto& t : rule->targets) total += static_cast<std::uint64_t>(t.weight);
  std::uint64_t point = key % total;
  for (const auto& t : rule->targets) {
    if (point < static_cast<std::uint64_t>(t.weight)) return t.model;
    point -= static_cast<std::uint64_t>(t.weight);
  }
  return rule->targets.back().model;  // not reached: point < total
}

void EppPolicy::SetObjectives(std::string_view group, std::vector<k8s::Objective> objectives) {
  std::unique_lock lock(mu_);
  auto& set = objectives_[std::string(group)];
  set.clear();
  for (auto& o : objectives) set[o.name] = o.priority;
  Rebuild();
}

void EppPolicy::SetRewrites(std::string_view group, std::vector<k8s::RewriteRule> rules) {
  std::unique_lock lock(mu_);
  rewrites_[std::string(group)] = std::move(rules);
  Rebuild();
}

void EppPolicy::Rebuild() {
  // Objectives: the config, then each group from the lowest precedence up, so the current
  // group's entry is the one left.
  priority_ = configured_;
  std::vector<const std::pair<const std::string, std::map<std::string, int, std::less<>>>*> groups;
  for (const auto& g : objectives_) groups.push_back(&g);
  std::sort(groups.begin(), groups.end(),
            [](auto* a, auto* b) { return GroupRank(a->first) > GroupRank(b->first); });
  for (auto* g : groups) {
    for (const auto& [name, p] : g->second) priority_[name] = p;
  }

  // Rewrites: every group's rules, an object name counted once (from the group ranked first).
  std::map<std::string, int> owner;  // object name → rank of the group that supplies it
  for (const auto& [group, rules] : rewrites_) {
    for (const auto& r : rules) {
      auto [it, inserted] = owner.emplace(r.object, GroupRank(group));
      if (!inserted) it->second = std::min(it->second, GroupRank(group));
    }
  }
  rules_.clear();
  for (const auto& [group, rules] : rewrites_) {
    for (const auto& r : rules) {
      if (owner[r.object] == GroupRank(group)) rules_.push_back(r);
    }
  }
  std::stable_sort(rules_.begin(), rules_.end(), [](const auto& a, const auto& b) {
    return std::tie(a.created, a.object, a.index) < std::tie(b.created, b.object, b.index);
  });
}

}  // namespace kvroute::extproc

#include "k8s/objective_discovery.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "k8s/json_read.h"
#include "k8s/watch_line.h"

namespace kvroute::k8s {
namespace {

using namespace json_read;

constexpr std::int64_t kMaxWeight = 1'000'000;  // the CRD's bound

// Whether spec.poolRef names `pool` (an InferencePool of the object's namespace).
bool NamesPool(const json::object* spec, const std::string& pool) {
  const json::object* ref = Obj(Field(spec, "poolRef"));
  if (!ref || Str(ref, "name") != pool) return false;
  const std::string kind = Str(ref, "kind");
  return kind.empty() || kind == "InferencePool";
}

std::optional<std::int64_t> Int(const json::value* v) {
  if (!v) return std::nullopt;
  if (v->is_int64()) return v->as_int64();
  if (v->is_uint64()) return static_cast<std::int64_t>(std::min<std::uint64_t>(v->as_uint64(), kMaxWeight));
  return std::nullopt;
}

std::vector<RewriteRule> ReadRules(const json::object* meta, const json::object* spec) {
  std::vector<RewriteRule> out;
  const json::value* rules = Field(spec, "rules");
  if (!rules || !rules->is_array()) return out;
  int index = 0;
  for (const auto& r : rules->as_array()) {
    RewriteRule rule{.object = Str(meta, "name"), .created = Str(meta, "creationTimestamp"), .index = index++};
    const json::object* ro = Obj(&r);
    if (const json::value* matches = Field(ro, "matches"); matches && matches->is_array()) {
      for (const auto& m : matches->as_array()) {
        const json::object* model = Obj(Field(Obj(&m), "model"));
        const std::string type = Str(model, "type");
        const std::string value = Str(model, "value");
        // Exact is the only match type the API defines (and its default); anything else
        // cannot be evaluated, so the criterion matches nothing rather than everything.
        const bool exact = !value.empty() && (type.empty() || type == "Exact");
        rule.models.push_back(exact ? value : std::string());  // "" matches no request
      }
    }
    if (const json::value* targets = Field(ro, "targets"); targets && targets->is_array()) {
      for (const auto& t : targets->as_array()) {
        const json::object* to = Obj(&t);
        RewriteTarget target{.model = Str(to, "modelRewrite")};
        if (auto w = Int(Field(to, "weight")); w && *w > 0) target.weight = std::min(*w, kMaxWeight);
        if (!target.model.empty()) rule.targets.push_back(std::move(target));
      }
    }
    if (!rule.targets.empty()) out.push_back(std::move(rule));
  }
  return out;
}

}  // namespace

std::string_view PluralOf(ServingKind kind) {
  return kind == ServingKind::kObjective ? "inferenceobjectives" : "inferencemodelrewrites";
}

ServingObjectReconciler::ServingObjectReconciler(ServingKind kind, std::string group, std::string pool,
                                                 ServingObjectSink* sink)
    : kind_(kind), group_(std::move(group)), pool_(std::move(pool)), sink_(sink) {}

std::vector<std::string> ServingObjectReconciler::Members() const {
  std::vector<std::string> out;
  for (const auto& [name, e] : objects_) out.push_back(name);
  return out;
}

void ServingObjectReconciler::Publish() const {
  if (kind_ == ServingKind::kObjective) {
    std::vector<Objective> out;
    for (const auto& [name, e] : objects_) out.push_back(e.objective);
    sink_->SetObjectives(group_, std::move(out));
    return;
  }
  std::vector<RewriteRule> out;
  for (const auto& [name, e] : objects_) out.insert(out.end(), e.rules.begin(), e.rules.end());
  sink_->SetRewrites(group_, std::move(out));
}

namespace {

// The object's entry, or nullopt when it does not count for `pool` (or has no name).
template <typename Entry>
std::optional<std::pair<std::string, Entry>> ReadObject(ServingKind kind, const json::object* object,
                                                        const std::string& pool) {
  const json::object* meta = Obj(Field(object, "metadata"));
  const json::object* spec = Obj(Field(object, "spec"));
  std::string name = Str(meta, "name");
  if (name.empty() || !NamesPool(spec, pool)) return std::nullopt;
  Entry e;
  if (kind == ServingKind::kObjective) {
    e.objective.name = name;
    if (auto p = Int(Field(spec, "priority"))) {
      e.objective.priority = static_cast<int>(std::clamp<std::int64_t>(
          *p, std::numeric_limits<int>::min(), std::numeric_limits<int>::max()));
    }
  } else {
    e.rules = ReadRules(meta, spec);
  }
  return std::make_pair(std::move(name), std::move(e));
}

}  // namespace

std::expected<std::string, std::string> ServingObjectReconciler::ApplyList(std::string_view body) {
  auto v = Parse(body);
  if (!v) return std::unexpected(std::string(PluralOf(kind_)) + " list: " + v.error());
  const json::object* root = Obj(&*v);
  const json::value* items = Field(root, "items");
  if (!items || !items->is_array()) return std::unexpected(std::string(PluralOf(kind_)) + " list: no items");
  objects_.clear();
  for (const auto& item : items->as_array()) {
    if (auto e = ReadObject<Entry>(kind_, Obj(&item), pool_)) objects_.insert(std::move(*e));
  }
  resource_version_ = Str(Obj(Field(root, "metadata")), "resourceVersion");
  Publish();
  return resource_version_;
}

WatchReconciler::Event ServingObjectReconciler::ApplyEvent(std::string_view text) {
  WatchLine line = ReadWatchLine(text);
  if (line.event == Event::kBookmark && !line.resource_version.empty()) resource_version_ = line.resource_version;
  if (line.event != Event::kApplied) return line.event;
  const std::string name = Str(Obj(Field(line.object(), "metadata")), "name");
  auto e = line.type == "DELETED" ? std::nullopt : ReadObject<Entry>(kind_, line.object(), pool_);
  // Deleted, or no longer naming this pool: it leaves; otherwise it is (re)placed.
  objects_.erase(name);
  if (e) objects_.insert(std::move(*e));
  if (!line.resource_version.empty()) resource_version_ = line.resource_version;
  Publish();
  return Event::kApplied;
}

}  // namespace kvroute::k8s

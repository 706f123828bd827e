#include "gateway/pd_debug.h"

#include <boost/json.hpp>

namespace kvroute::gateway {
namespace {

std::string NameOf(WorkerId id, const std::function<std::string(WorkerId)>& name_of) {
  std::string name = name_of ? name_of(id) : std::string();
  return name.empty() ? "worker " + std::to_string(id) : name;
}

boost::json::value OptionOrNull(const std::optional<sched::PdOption>& o,
                                const std::function<std::string(WorkerId)>& name_of) {
  if (!o) return nullptr;
  return PdOptionJson(*o, name_of);
}

}  // namespace

boost::json::object PdOptionJson(const sched::PdOption& o,
                                 const std::function<std::string(WorkerId)>& name_of) {
  boost::json::object j;
  j["placement"] = o.split ? "split" : "aggregated";
  j["prefill_worker"] = NameOf(o.prefill, name_of);
  j["decode_worker"] = NameOf(o.decode, name_of);
  j["cost_s"] = o.cost_s();  // ttft_s + slowdown_s: what the cost rule minimises
  j["ttft_s"] = o.ttft_s;
  j["slowdown_s"] = o.slowdown_s;
  j["itl_s"] = o.itl_s;
  j["prefill_tokens"] = o.prefill_tokens;
  j["prefill_ttft_s"] = o.prefill_ttft_s;
  j["prefill_wait_s"] = o.prefill_wait_s;
  if (o.split) {
    j["transfer_blocks"] = o.transfer_blocks;
    j["transfer_bytes"] = o.transfer_bytes;
    j["transfer_s"] = o.transfer_s;
  }
  return j;
}

boost::json::object PdDecisionJson(const sched::PdDecision& d,
                                   const std::function<std::string(WorkerId)>& name_of) {
  boost::json::object j;
  j["split"] = d.chosen && d.chosen->split;
  j["reason"] = d.reason;
  if (!d.why_none.empty()) j["why_none"] = d.why_none;
  if (d.chosen) {
    j["prefill_worker"] = NameOf(d.chosen->prefill, name_of);
    j["decode_worker"] = NameOf(d.chosen->decode, name_of);
    j["cost_s"] = d.chosen->cost_s();
    if (d.chosen->split) j["transfer_s"] = d.chosen->transfer_s;
  } else {
    j["prefill_worker"] = nullptr;
    j["decode_worker"] = nullptr;
  }
  // The two sides of the cost rule: the cheapest colocated option and the cheapest split.
  j["aggregated_cost_s"] = d.best_aggregated ? boost::json::value(d.best_aggregated->cost_s())
                                             : boost::json::value(nullptr);
  j["split_cost_s"] =
      d.best_split ? boost::json::value(d.best_split->cost_s()) : boost::json::value(nullptr);
  if (d.preset_threshold_tokens) {
    j["uncached_tokens"] = d.preset_uncached_tokens.value_or(0);
    j["threshold_tokens"] = *d.preset_threshold_tokens;
  }
  j["chosen"] = OptionOrNull(d.chosen, name_of);
  j["best_aggregated"] = OptionOrNull(d.best_aggregated, name_of);
  j["best_split"] = OptionOrNull(d.best_split, name_of);
  boost::json::array options;
  for (const sched::PdOption& o : d.options) options.push_back(PdOptionJson(o, name_of));
  j["options"] = std::move(options);
  return j;
}

}  // namespace kvroute::gateway

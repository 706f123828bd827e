#include "sched/pd_decision.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <vector>

namespace kvroute::sched {
namespace {

double Bound(double s) {
  if (std::isnan(s)) return kMaxPredictedSeconds;
  return std::clamp(s, 0.0, kMaxPredictedSeconds);
}

// The prefill leg's own request: the same prompt, one output token (vLLM's proxy sends
// max_tokens 1), so P's KV wait and decode terms see what P will really hold.
RequestProfile PrefillLeg(const RequestProfile& r) {
  RequestProfile p = r;
  p.predicted_output_tokens = 1;
  return p;
}

// The queue-behind term (header): the requests waiting on the prefilling worker now stand for
// those that will wait behind this prefill.
double QueueBehind(const WorkerSnapshot& w, double prefill_s, const PdOptions& options) {
  if (!(options.queue_behind > 0) || w.pending_prefill_requests == 0) return 0;
  return Bound(options.queue_behind * w.pending_prefill_requests * prefill_s);
}

// What a split costs on the prefill side, independent of D.
struct PrefillSide {
  double ttft_s = 0;   // the prefill leg's predicted TTFT on P
  double wait_s = 0;   // its queue-dependent part
  double stall_s = 0;  // what its chunks cost P's own decodes (mixed P only)
  double behind_s = 0; // what its prefill costs the requests that queue behind it on P
  std::uint64_t prefill_tokens = 0;
  std::uint32_t tp = 1;
};

std::expected<PrefillSide, std::string> PrefillSideOf(const RequestProfile& request,
                                                      const CacheView& view,
                                                      const WorkerSnapshot& p,
                                                      const PdOptions& options) {
  const RequestProfile leg = PrefillLeg(request);
  // A prefill-only worker's in-flight requests are prefill legs, not a decode batch that
  // every chunk step carries.
  TtftTerms terms = options.ttft;
  if (p.role == Role::kPrefill) terms.decode_load = 0;
  auto ttft = PredictTtft(leg, view, p, terms);
  if (!ttft) return std::unexpected(ttft.error());
  PrefillSide side;
  side.ttft_s = ttft->total_s();
  side.wait_s = ttft->wait_s();
  side.behind_s = QueueBehind(p, ttft->prefill_s, options);
  side.prefill_tokens = PlanLoad(leg, view, p).uncached_tokens;
  side.tp = std::max<std::uint32_t>(p.tp, 1);
  if (p.role == Role::kMixed && p.inflight_requests > 0 && options.slowdown.stall > 0) {
    auto prefill = PrefillSeconds(p, side.prefill_tokens, request.prompt_tokens - side.prefill_tokens);
    if (!prefill) return std::unexpected(prefill.error());
    side.stall_s = Bound(options.slowdown.stall * p.inflight_requests * *prefill);
  }
  if (p.role == Role::kMixed && p.inflight_requests > 0 && options.chunk_stall > 0) {
    auto stall = PredictChunkStall(leg, view, p, options.slowdown.chunk_tokens);
    if (!stall) return std::unexpected(stall.error());
    side.stall_s = Bound(side.stall_s + options.chunk_stall * *stall);
  }
  return side;
}

// What a split costs on the decode side, independent of P except for the lanes.
struct DecodeSide {
  std::uint32_t lacking_blocks = 0;  // prompt blocks (partial last included) D must pull
  double bytes_per_block = 0;
  double lane_bytes_per_s = 0;
  double latency_s = 0;
  double load_s = 0;      // D's own lower-tier loads
  double step_s = 0;      // the step that recomputes the last prompt token
  double kv_wait_s = 0;
  double slowdown_s = 0;  // own + others, no stall
  double itl_s = 0;
  std::uint32_t tp = 1;
};

std::expected<std::optional<DecodeSide>, std::string> DecodeSideOf(const RequestProfile& request,
                                                                   const CacheView& view,
                                                                   const WorkerSnapshot& d,
                                                                   const PdOptions& options) {
  if (!d.kv_link_bytes_per_s || !d.kv_transfer_bytes_per_block) return std::optional<DecodeSide>();
  DecodeSide side;
  side.lane_bytes_per_s = *d.kv_link_bytes_per_s;
  side.bytes_per_block = *d.kv_transfer_bytes_per_block;
  side.latency_s = d.kv_link_latency_s;
  if (!std::isfinite(side.lane_bytes_per_s) || !(side.lane_bytes_per_s > 0)) {
    return std::unexpected("worker '" + d.name + "' has an unusable kv_link_bytes_per_s");
  }
  if (!std::isfinite(side.bytes_per_block) || side.bytes_per_block < 0 ||
      !std::isfinite(side.latency_s) || side.latency_s < 0) {
    return std::unexpected("worker '" + d.name +
                           "' has an unusable kv_transfer_bytes_per_block or kv_link_latency_s");
  }
  const LoadPlan plan = PlanLoad(request, view, d);
  const std::uint64_t bs = std::max<std::uint32_t>(request.block_size, 1);
  const std::uint64_t blocks = (request.prompt_tokens + bs - 1) / bs;
  side.lacking_blocks = static_cast<std::uint32_t>(blocks > plan.hit_blocks ? blocks - plan.hit_blocks : 0);
  side.load_s = plan.load_s;
  side.tp = std::max<std::uint32_t>(d.tp, 1);
  // KV wait only: D does not prefill (its queue of prefill tokens is not ahead of a decode
  // leg, which vLLM schedules before the waiting queue once its KV is in).
  TtftTerms kv_only = options.ttft;
  kv_only.decode_load = 0;
  auto ttft = PredictTtft(request, view, d, kv_only);
  if (!ttft) return std::unexpected(ttft.error());
  side.kv_wait_s = ttft->kv_wait_s;
  auto itl = PredictItl(request, view, d);
  if (!itl) return std::unexpected(itl.error());
  side.itl_s = *itl;
  side.step_s = *itl;  // one step of the batch it joins
  SlowdownTerms no_stall = options.slowdown;
  no_stall.stall = 0;
  auto slowdown = PredictDecodeSlowdown(request, view, d, no_stall);
  if (!slowdown) return std::unexpected(slowdown.error());
  side.slowdown_s = slowdown->total_s();
  return std::optional<DecodeSide>(side);
}

PdOption Combine(const PrefillSide& p, WorkerId p_id, const DecodeSide& d, WorkerId d_id) {
  PdOption o;
  o.split = true;
  o.prefill = p_id;
  o.decode = d_id;
  o.prefill_tokens = p.prefill_tokens;
  o.prefill_ttft_s = p.ttft_s;
  o.prefill_wait_s = p.wait_s;
  o.transfer_blocks = d.lacking_blocks;
  o.transfer_bytes = d.lacking_blocks * d.bytes_per_block;
  const double lanes = std::max<std::uint32_t>(1, std::min(p.tp, d.tp));
  o.transfer_s = Bound(d.latency_s + o.transfer_bytes / (lanes * d.lane_bytes_per_s));
  o.ttft_s = Bound(p.ttft_s + o.transfer_s + d.load_s + d.step_s + d.kv_wait_s);
  o.itl_s = d.itl_s;
  o.behind_s = p.behind_s;
  o.slowdown_s = Bound(d.slowdown_s + p.stall_s + p.behind_s);
  return o;
}

const CacheView& ViewOf(const std::map<WorkerId, const CacheView*>& views, WorkerId w,
                        CacheView* empty) {
  auto it = views.find(w);
  if (it != views.end()) return *it->second;
  *empty = CacheView{};
  empty->worker = w;
  return *empty;
}

// Strict order: cost, then aggregated before split (fewer moving parts), then ids.
bool Better(const PdOption& a, const PdOption& b) {
  if (a.cost_s() != b.cost_s()) return a.cost_s() < b.cost_s();
  if (a.split != b.split) return !a.split;
  if (a.decode != b.decode) return a.decode < b.decode;
  return a.prefill < b.prefill;
}

std::string Describe(const PdOption& o) {
  char buf[200];
  if (o.split) {
    std::snprintf(buf, sizeof buf,
                  "split %u->%u cost %.4fs (ttft %.4fs, transfer %.4fs of %u blocks, itl %.4fs)",
                  o.prefill, o.decode, o.cost_s(), o.ttft_s, o.transfer_s, o.transfer_blocks,
                  o.itl_s);
  } else {
    std::snprintf(buf, sizeof buf, "aggregated on %u cost %.4fs (ttft %.4fs, itl %.4fs)",
                  o.decode, o.cost_s(), o.ttft_s, o.itl_s);
  }
  return buf;
}

}  // namespace

const char* PdRuleName(PdRule rule) {
  switch (rule) {
    case PdRule::kCost:
      return "cost";
    case PdRule::kTokenCap:
      return "dynamo_token_cap";
    case PdRule::kNonCachedTokens:
      return "llmd_non_cached";
  }
  return "?";
}

std::optional<PdRule> ParsePdRule(std::string_view name) {
  for (PdRule r : {PdRule::kCost, PdRule::kTokenCap, PdRule::kNonCachedTokens}) {
    if (name == PdRuleName(r)) return r;
  }
  return std::nullopt;
}

namespace {
bool Usable(const WorkerSnapshot& w, const std::string& model) {
  return w.healthy && !w.draining && w.Serves(model);
}
}  // namespace

bool CanAggregate(const WorkerSnapshot& w, const std::string& model) {
  return Usable(w, model) && w.role != Role::kPrefill;
}
bool CanPrefillLeg(const WorkerSnapshot& w, const std::string& model) {
  return Usable(w, model) && w.role != Role::kDecode;
}
bool CanDecodeLeg(const WorkerSnapshot& w, const std::string& model) {
  return Usable(w, model) && w.role != Role::kPrefill && w.kv_link_bytes_per_s.has_value() &&
         w.kv_transfer_bytes_per_block.has_value();
}

std::expected<PdOption, std::string> CostAggregated(const RequestProfile& request,
                                                    const CacheView& view,
                                                    const WorkerSnapshot& worker,
                                                    const PdOptions& options) {
  auto ttft = PredictTtft(request, view, worker, options.ttft);
  if (!ttft) return std::unexpected(ttft.error());
  auto slowdown = PredictDecodeSlowdown(request, view, worker, options.slowdown);
  if (!slowdown) return std::unexpected(slowdown.error());
  double stall_s = 0;  // the chunk model's stall (header), on top of slowdown's own
  if (options.chunk_stall > 0) {
    auto stall = PredictChunkStall(request, view, worker, options.slowdown.chunk_tokens);
    if (!stall) return std::unexpected(stall.error());
    stall_s = Bound(options.chunk_stall * *stall);
  }
  auto itl = PredictItl(request, view, worker);
  if (!itl) return std::unexpected(itl.error());
  PdOption o;
  o.decode = o.prefill = worker.id;
  o.ttft_s = ttft->total_s();
  o.prefill_ttft_s = o.ttft_s;
  o.prefill_wait_s = ttft->wait_s();
  o.behind_s = QueueBehind(worker, ttft->prefill_s, options);
  o.slowdown_s = Bound(slowdown->total_s() + stall_s + o.behind_s);
  o.itl_s = *itl;
  o.prefill_tokens = PlanLoad(request, view, worker).uncached_tokens;
  return o;
}

std::expected<std::optional<PdOption>, std::string> CostSplit(
    const RequestProfile& request, const CacheView& prefill_view, const WorkerSnapshot& prefill,
    const CacheView& decode_view, const WorkerSnapshot& decode, const PdOptions& options) {
  auto d = DecodeSideOf(request, decode_view, decode, options);
  if (!d) return std::unexpected(d.error());
  if (!*d) return std::optional<PdOption>();
  auto p = PrefillSideOf(request, prefill_view, prefill, options);
  if (!p) return std::unexpected(p.error());
  return std::optional<PdOption>(Combine(*p, prefill.id, **d, decode.id));
}

std::expected<PdDecision, std::string> DecidePd(const RequestProfile& request,
                                                std::span<const WorkerSnapshot> workers,
                                                const PdOptions& options) {
  std::map<WorkerId, const CacheView*> views;
  for (const CacheView& v : request.cache_views) views.emplace(v.worker, &v);
  CacheView empty;
  const std::optional<double> slo = request.itl_slo_s ? request.itl_slo_s : options.itl_slo_s;
  auto meets = [&](const PdOption& o) { return !slo || o.itl_s <= *slo; };

  // Aggregated options and the per-worker sides of split options, each computed once.
  std::vector<PdOption> aggregated;
  std::vector<std::pair<WorkerId, PrefillSide>> prefills;
  std::vector<std::pair<WorkerId, DecodeSide>> decodes;
  for (const WorkerSnapshot& w : workers) {
    const CacheView& view = ViewOf(views, w.id, &empty);
    if (CanAggregate(w, request.model)) {
      auto o = CostAggregated(request, view, w, options);
      if (!o) return std::unexpected(o.error());
      aggregated.push_back(*o);
    }
    if (options.rule == PdRule::kNonCachedTokens && options.non_cached_tokens == 0) continue;
    if (CanPrefillLeg(w, request.model)) {
      auto p = PrefillSideOf(request, view, w, options);
      if (!p) return std::unexpected(p.error());
      prefills.emplace_back(w.id, *p);
    }
    if (CanDecodeLeg(w, request.model)) {
      auto d = DecodeSideOf(request, view, w, options);
      if (!d) return std::unexpected(d.error());
      if (*d) decodes.emplace_back(w.id, **d);
    }
  }
  auto best_split_for = [&](const std::pair<WorkerId, DecodeSide>& d) {
    std::optional<PdOption> best;
    for (const auto& [pid, p] : prefills) {
      if (pid == d.first) continue;
      PdOption o = Combine(p, pid, d.second, d.first);
      if (!best || Better(o, *best)) best = o;
    }
    return best;
  };
  // The SLO filter over a set of options: those that meet it, or all when none does.
  bool slo_waived = false;
  auto pick = [&](const std::vector<PdOption>& options_set) -> std::optional<PdOption> {
    std::optional<PdOption> best, best_meeting;
    for (const PdOption& o : options_set) {
      if (!best || Better(o, *best)) best = o;
      if (meets(o) && (!best_meeting || Better(o, *best_meeting))) best_meeting = o;
    }
    if (best_meeting) return best_meeting;
    if (best && slo) slo_waived = true;
    return best;
  };

  PdDecision decision;
  std::vector<PdOption> splits;
  if (options.rule == PdRule::kCost) {
    for (const auto& d : decodes) {
      if (auto o = best_split_for(d)) splits.push_back(*o);
    }
    decision.best_aggregated = pick(aggregated);
    decision.best_split = pick(splits);
    std::vector<PdOption> all = aggregated;
    all.insert(all.end(), splits.begin(), splits.end());
    slo_waived = false;
    decision.chosen = pick(all);
    std::sort(all.begin(), all.end(), Better);
    decision.options = std::move(all);
    if (decision.chosen) {
      const std::optional<PdOption>& rival =
          decision.chosen->split ? decision.best_aggregated : decision.best_split;
      decision.reason = std::string("cost: ") + Describe(*decision.chosen) +
                        (rival ? "; rival " + Describe(*rival) : "; no rival");
    }
  } else {
    // The decode worker first (the cheapest aggregated option), then the rule.
    decision.best_aggregated = pick(aggregated);
    if (decision.best_aggregated) {
      const PdOption& agg = *decision.best_aggregated;
      const std::uint64_t uncached = agg.prefill_tokens;
      const bool split = options.rule == PdRule::kTokenCap
                             ? uncached > options.token_cap
                             : options.non_cached_tokens > 0 && uncached >= options.non_cached_tokens;
      for (const auto& d : decodes) {
        if (d.first == agg.decode) decision.best_split = best_split_for(d);
      }
      decision.options = aggregated;
      if (decision.best_split) decision.options.push_back(*decision.best_split);
      std::sort(decision.options.begin(), decision.options.end(), Better);
      decision.preset_uncached_tokens = uncached;
      decision.preset_threshold_tokens =
          options.rule == PdRule::kTokenCap ? options.token_cap : options.non_cached_tokens;
      char buf[120];
      std::snprintf(buf, sizeof buf, "%s: %llu uncached tokens on %u, threshold %llu: ",
                    PdRuleName(options.rule), static_cast<unsigned long long>(uncached),
                    agg.decode,
                    static_cast<unsigned long long>(options.rule == PdRule::kTokenCap
                                                        ? options.token_cap
                                                        : options.non_cached_tokens));
      if (split && decision.best_split) {
        decision.chosen = decision.best_split;
        decision.reason = buf + Describe(*decision.chosen);
      } else {
        decision.chosen = agg;
        decision.reason = buf + std::string(split ? "split wanted, no prefill worker or link; "
                                                  : "") +
                          Describe(agg);
      }
    }
  }
  if (slo_waived) decision.reason += " (no option meets the ITL SLO: all kept)";
  if (!decision.chosen) {
    decision.why_none = "no healthy worker serving '" + request.model +
                        "' can take the request (aggregated needs a mixed or decode worker)";
  }
  return decision;
}

}  // namespace kvroute::sched

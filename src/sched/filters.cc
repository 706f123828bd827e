#include "sched/filters.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "sched/latency_model.h"
#include "sched/registry.h"

namespace kvroute::sched {
namespace {

using Verdicts = std::vector<FilterVerdict>;

// A filter that judges each candidate alone. `fn(request, candidate, reason)` returns whether
// to keep it and, when dropping and `reason` is non-null, writes why (Keep passes null, so
// the simulator's decisions format no strings).
template <typename Fn>
class PerCandidateFilter final : public Filter {
 public:
  PerCandidateFilter(std::string_view name, Inputs needs, Fn fn)
      : name_(name), needs_(needs), fn_(std::move(fn)) {}
  std::string_view Name() const override { return name_; }
  Inputs Needs() const override { return needs_; }
  std::expected<Verdicts, SchedError> Apply(const RequestProfile& request,
                                            std::span<const Candidate> candidates) const override {
    Verdicts out;
    out.reserve(candidates.size());
    for (const Candidate& c : candidates) {
      std::string reason;
      std::expected<bool, SchedError> keep = fn_(request, c, &reason);
      if (!keep) return std::unexpected(std::move(keep.error()));
      out.push_back({*keep, *keep ? std::string() : std::move(reason)});
    }
    return out;
  }
  std::expected<void, SchedError> Keep(const RequestProfile& request,
                                       std::span<const Candidate> candidates,
                                       std::vector<char>* keep) const override {
    keep->resize(candidates.size());
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      std::expected<bool, SchedError> k = fn_(request, candidates[i], nullptr);
      if (!k) return std::unexpected(std::move(k.error()));
      (*keep)[i] = *k ? 1 : 0;
    }
    return {};
  }

 private:
  std::string_view name_;
  Inputs needs_;
  Fn fn_;
};

// Drops with `text()` as the reason when the caller wants one.
template <typename Text>
bool Drop(std::string* reason, Text text) {
  if (reason != nullptr) *reason = text();
  return false;
}

template <typename Fn>
std::shared_ptr<const Filter> Make(std::string_view name, Inputs needs, Fn fn) {
  return std::make_shared<const PerCandidateFilter<Fn>>(name, needs, std::move(fn));
}

SchedError Missing(std::string_view filter, const std::string& what) {
  return {SchedError::Code::kMissingInput, fmt::format("filter '{}': {}", filter, what)};
}

}  // namespace

using Kept = std::expected<bool, SchedError>;

std::shared_ptr<const Filter> NewHealthyFilter() {
  return Make("healthy", kNoInputs,
              [](const RequestProfile&, const Candidate& c, std::string* reason) -> Kept {
                return c.worker->healthy || Drop(reason, [] { return "unhealthy"; });
              });
}

std::shared_ptr<const Filter> NewNotDrainingFilter() {
  return Make("not_draining", kNoInputs,
              [](const RequestProfile&, const Candidate& c, std::string* reason) -> Kept {
                return !c.worker->draining || Drop(reason, [] { return "draining"; });
              });
}

std::shared_ptr<const Filter> NewModelFilter() {
  return Make("model", kNoInputs,
              [](const RequestProfile& r, const Candidate& c, std::string* reason) -> Kept {
                if (!c.worker->Serves(r.model)) {
                  return Drop(reason,
                              [&] { return fmt::format("does not serve model '{}'", r.model); });
                }
                if (r.lora_name && !c.worker->Serves(*r.lora_name)) {
                  return Drop(reason, [&] {
                    return fmt::format("does not serve LoRA adapter '{}'", *r.lora_name);
                  });
                }
                return true;
              });
}

std::shared_ptr<const Filter> NewRoleFilter(std::vector<Role> allowed) {
  return Make("role", kNoInputs,
              [allowed = std::move(allowed)](const RequestProfile&, const Candidate& c,
                                             std::string* reason) -> Kept {
                if (std::ranges::find(allowed, c.worker->role) != allowed.end()) return true;
                return Drop(reason, [&] {
                  return fmt::format("role {} not allowed", RoleName(c.worker->role));
                });
              });
}

namespace {

// prefix_affinity with the derived bound (filters.h): set-relative, so not a
// PerCandidateFilter. Cost: one TTFT prediction per candidate plus one comparison per
// (holder, candidate) pair; a request has one holder or a few.
class DerivedAffinity final : public Filter {
 public:
  explicit DerivedAffinity(const PrefixAffinityOptions& o) : o_(o) {}
  std::string_view Name() const override { return "prefix_affinity"; }
  Inputs Needs() const override {
    return kCacheView | kRouterLoad | kRates | (o_.terms.kv_wait > 0 ? kScrapedMetrics : kNoInputs);
  }
  std::expected<Verdicts, SchedError> Apply(const RequestProfile& r,
                                            std::span<const Candidate> cs) const override {
    return Judge(r, cs, true);
  }
  std::expected<void, SchedError> Keep(const RequestProfile& r, std::span<const Candidate> cs,
                                       std::vector<char>* keep) const override {
    auto v = Judge(r, cs, false);
    if (!v) return std::unexpected(std::move(v.error()));
    keep->resize(cs.size());
    for (std::size_t i = 0; i < cs.size(); ++i) (*keep)[i] = (*v)[i].keep ? 1 : 0;
    return {};
  }

 private:
  std::expected<Verdicts, SchedError> Judge(const RequestProfile& r, std::span<const Candidate> cs,
                                            bool reasons) const {
    const std::size_t n = cs.size();
    Verdicts out(n);
    std::vector<std::size_t> holders;
    for (std::size_t i = 0; i < n; ++i) {
      const double ratio = PrefixHitRatio(r, cs[i].cache);
      if (ratio >= o_.threshold) {
        holders.push_back(i);
      } else {
        out[i].keep = false;
        if (reasons) out[i].reason = fmt::format("prefix hit {:.2f} < {:.2f}", ratio, o_.threshold);
      }
    }
    if (holders.empty()) return out;
    // Every candidate's predicted TTFT, uncached tokens and rate.
    std::vector<double> ttft(n), uncached(n);
    for (std::size_t i = 0; i < n; ++i) {
      const WorkerSnapshot& w = *cs[i].worker;
      auto p = PredictTtft(r, cs[i].cache, w, w.decode_step ? o_.terms : TtftTerms{});
      if (!p) return std::unexpected(Missing("prefix_affinity", p.error()));
      ttft[i] = p->total_s();
      uncached[i] = static_cast<double>(PlanLoad(r, cs[i].cache, w).uncached_tokens);
    }
    // The deepest viable holder wins: h is viable when no idle worker beats it by more than
    // the recompute h saves (nothing, against an idle worker at least as deep). Holders are tried deepest first;
    // one that is not viable is dropped with the numbers, and the next is tried. The deepest
    // viable depth keeps its holders (the scorers choose among them); everyone else is
    // dropped. None viable: every candidate is dropped and the policy's keep_all applies.
    std::ranges::sort(holders, [&](std::size_t a, std::size_t b) {
      return uncached[a] != uncached[b] ? uncached[a] < uncached[b] : a < b;
    });
    const auto viable = [&](std::size_t h) {
      for (std::size_t o = 0; o < n; ++o) {
        const WorkerSnapshot& ow = *cs[o].worker;
        if (o == h) continue;
        // "No prefill queue" counts requests still waiting for their first token, not the
        // drained token estimate (fleet/load_tracker.h): the estimate reaches zero before
        // the first tokens arrive, and live that made waiting workers look free.
        const bool free = ow.pending_prefill_requests == 0 &&
                          (o_.rivals == PrefixAffinityOptions::Rivals::kNoPrefillQueue ||
                           ow.inflight_requests == 0);
        if (!free) continue;  // busy
        // Against every idle worker, even one as deep (saved 0): the rule is the TTFT bound.
        // What o would recompute beyond h's uncached part, at o's prefill curve: the prefill
        // of o's uncached tokens minus that of h's (same prompt, so the same context).
        double saved_s = 0;
        if (uncached[o] > uncached[h]) {
          const auto prompt = static_cast<double>(r.prompt_tokens);
          auto more = PrefillSeconds(ow, static_cast<std::uint64_t>(uncached[o]),
                                     static_cast<std::uint64_t>(prompt - uncached[o]));
          auto less = PrefillSeconds(ow, static_cast<std::uint64_t>(uncached[h]),
                                     static_cast<std::uint64_t>(prompt - uncached[h]));
          if (more && less) saved_s = std::max(0.0, *more - *less);  // checked by PredictTtft
        }
        if (ttft[h] > ttft[o] + saved_s) {
          out[h].keep = false;
          if (reasons) {
            out[h].reason = fmt::format(
                "saturated: predicted TTFT {:.3f}s > {:.3f}s on {} '{}' + {:.3f}s of recompute "
                "saved",
                ttft[h], ttft[o], ow.inflight_requests == 0 ? "idle" : "unqueued", ow.name,
                saved_s);
          }
          return false;
        }
      }
      return true;
    };
    std::optional<double> depth;  // uncached tokens of the deepest viable holder
    std::string deepest;
    for (std::size_t h : holders) {
      if (depth && uncached[h] != *depth) {
        out[h].keep = false;
        if (reasons) out[h].reason = fmt::format("holds less of the prompt than '{}'", deepest);
        continue;
      }
      if (!viable(h)) continue;
      if (!depth) {
        depth = uncached[h];
        deepest = cs[h].worker->name;
      }
    }
    return out;
  }

  PrefixAffinityOptions o_;
};

}  // namespace

std::shared_ptr<const Filter> NewPrefixAffinityFilter(const PrefixAffinityOptions& options) {
  if (options.derived_tau) return std::make_shared<const DerivedAffinity>(options);
  return Make(
      "prefix_affinity", kCacheView | kRouterLoad | kRates,
      [options](const RequestProfile& r, const Candidate& c, std::string* reason) -> Kept {
        const double ratio = PrefixHitRatio(r, c.cache);
        if (ratio < options.threshold) {
          return Drop(reason, [&] {
            return fmt::format("prefix hit {:.2f} < {:.2f}", ratio, options.threshold);
          });
        }
        const WorkerSnapshot& w = *c.worker;
        if (!w.prefill_tokens_per_s || !std::isfinite(*w.prefill_tokens_per_s) ||
            !(*w.prefill_tokens_per_s > 0)) {
          return std::unexpected(Missing(
              "prefix_affinity",
              fmt::format("worker '{}' has no usable prefill_tokens_per_s", w.name)));
        }
        // Look-ahead: what is already pending plus what this request would add there.
        const double lookahead = static_cast<double>(w.pending_prefill_tokens) +
                                 static_cast<double>(r.prompt_tokens) * (1.0 - ratio);
        const double tau = *w.prefill_tokens_per_s * options.max_ttft_penalty_s;
        if (lookahead > tau) {
          return Drop(reason, [&] {
            return fmt::format("saturated: pending prefill {:.0f} tokens > tau {:.0f}", lookahead,
                               tau);
          });
        }
        return true;
      });
}

std::shared_ptr<const Filter> NewItlGuardFilter(const ItlGuardOptions& options) {
  return Make("itl_guard", kCacheView | kRouterLoad | kRates,
              [options](const RequestProfile& r, const Candidate& c, std::string* reason) -> Kept {
                std::expected<double, std::string> itl = PredictItl(r, c.cache, *c.worker);
                if (!itl) return std::unexpected(Missing("itl_guard", itl.error()));
                const double slo = r.itl_slo_s.value_or(options.itl_slo_s);
                if (*itl <= slo) return true;
                // The conversation's holder stays eligible within the bounded factor.
                if (options.holder_threshold <= 1 && *itl <= slo * options.holder_max_itl_factor &&
                    PrefixHitRatio(r, c.cache) >= options.holder_threshold) {
                  return true;
                }
                return Drop(reason, [&] {
                  return fmt::format("predicted ITL {:.4f}s > SLO {:.4f}s", *itl, slo);
                });
              });
}

// The default for filters that do not override Keep: Apply, reasons dropped.
std::expected<void, SchedError> Filter::Keep(const RequestProfile& request,
                                             std::span<const Candidate> candidates,
                                             std::vector<char>* keep) const {
  auto verdicts = Apply(request, candidates);
  if (!verdicts) return std::unexpected(std::move(verdicts.error()));
  keep->clear();
  for (const FilterVerdict& v : *verdicts) keep->push_back(v.keep ? 1 : 0);
  return {};
}

// The plug-ins' YAML options (sched/registry.h's format), parsed beside the plug-ins they build.
void RegisterBuiltinFilters(Registry& registry) {
  using Unexpected = std::unexpected<ConfigError>;
  using Made = std::expected<std::shared_ptr<const Filter>, ConfigError>;
  [[maybe_unused]] constexpr double kInf = std::numeric_limits<double>::infinity();
  registry.AddFilter(
      "healthy", [](Params&) -> Made { return NewHealthyFilter(); }, IfAllDropped::kFail);
  registry.AddFilter(
      "not_draining", [](Params&) -> Made { return NewNotDrainingFilter(); },
      IfAllDropped::kFail);
  registry.AddFilter(
      "model", [](Params&) -> Made { return NewModelFilter(); }, IfAllDropped::kFail);
  registry.AddFilter(
      "role",
      [](Params& p) -> Made {
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
  registry.AddFilter(
      "prefix_affinity",
      [](Params& p) -> Made {
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
  registry.AddFilter(
      "itl_guard",
      [](Params& p) -> Made {
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
}

}  // namespace kvroute::sched

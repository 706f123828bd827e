#include "sched/filters.h"

#include <fmt/format.h>

#include <algorithm>

#include "sched/latency_model.h"

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

std::shared_ptr<const Filter> NewPrefixAffinityFilter(const PrefixAffinityOptions& options) {
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
        if (!w.prefill_tokens_per_s) {
          return std::unexpected(Missing(
              "prefix_affinity", fmt::format("worker '{}' has no prefill_tokens_per_s", w.name)));
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

}  // namespace kvroute::sched

#include "sched/scorers.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "sched/latency_model.h"
#include "sched/registry.h"

namespace kvroute::sched {
namespace {

using Costs = std::vector<double>;

// A scorer whose cost for a candidate depends only on that candidate.
template <typename Fn>
class PerCandidateScorer final : public Scorer {
 public:
  PerCandidateScorer(std::string_view name, Inputs needs, Fn fn)
      : name_(name), needs_(needs), fn_(std::move(fn)) {}
  std::string_view Name() const override { return name_; }
  Inputs Needs() const override { return needs_; }
  std::expected<Costs, SchedError> Score(const RequestProfile& request,
                                         std::span<const Candidate> candidates) const override {
    Costs out;
    out.reserve(candidates.size());
    for (const Candidate& c : candidates) {
      std::expected<double, SchedError> cost = fn_(request, c);
      if (!cost) return std::unexpected(std::move(cost.error()));
      out.push_back(*cost);
    }
    return out;
  }

 private:
  std::string_view name_;
  Inputs needs_;
  Fn fn_;
};

template <typename Fn>
std::shared_ptr<const Scorer> Make(std::string_view name, Inputs needs, Fn fn) {
  return std::make_shared<const PerCandidateScorer<Fn>>(name, needs, std::move(fn));
}

using Result = std::expected<double, SchedError>;

class InflightNormalized final : public Scorer {
 public:
  std::string_view Name() const override { return "inflight_normalized"; }
  Inputs Needs() const override { return kRouterLoad; }
  std::expected<Costs, SchedError> Score(const RequestProfile&,
                                         std::span<const Candidate> candidates) const override {
    Costs out;
    double lo = std::numeric_limits<double>::infinity();
    double hi = -lo;
    for (const Candidate& c : candidates) {
      out.push_back(c.worker->inflight_requests);
      lo = std::min(lo, out.back());
      hi = std::max(hi, out.back());
    }
    // Equal loads: nobody is worse, all cost 0 (and 0/0 is avoided).
    for (double& v : out) v = hi > lo ? (v - lo) / (hi - lo) : 0.0;
    return out;
  }
};

// Min-max normalised engine queue length; unknown queues cost the maximum (1) so that a
// worker we cannot see is never preferred over one we know is idle.
class EngineQueue final : public Scorer {
 public:
  std::string_view Name() const override { return "engine_queue"; }
  Inputs Needs() const override { return kScrapedMetrics; }
  std::expected<Costs, SchedError> Score(const RequestProfile&,
                                         std::span<const Candidate> candidates) const override {
    std::vector<std::optional<double>> waiting;
    double lo = std::numeric_limits<double>::infinity();
    double hi = -lo;
    for (const Candidate& c : candidates) {
      const auto& s = c.worker->scraped;
      waiting.push_back(s && s->num_waiting ? std::optional<double>(*s->num_waiting)
                                            : std::nullopt);
      if (waiting.back()) {
        lo = std::min(lo, *waiting.back());
        hi = std::max(hi, *waiting.back());
      }
    }
    Costs out;
    for (const auto& w : waiting) {
      if (!w)
        out.push_back(1.0);
      else
        out.push_back(hi > lo ? (*w - lo) / (hi - lo) : 0.0);
    }
    return out;
  }
};

}  // namespace

std::shared_ptr<const Scorer> NewEngineQueueScorer() {
  return std::make_shared<const EngineQueue>();
}

std::shared_ptr<const Scorer> NewInflightRequestsScorer() {
  return Make("inflight_requests", kRouterLoad,
              [](const RequestProfile&, const Candidate& c) -> Result {
                return static_cast<double>(c.worker->inflight_requests);
              });
}

std::shared_ptr<const Scorer> NewInflightNormalizedScorer() {
  return std::make_shared<const InflightNormalized>();
}

std::shared_ptr<const Scorer> NewKvUsageScorer() {
  return Make("kv_usage", kRouterLoad, [](const RequestProfile&, const Candidate& c) -> Result {
    const WorkerSnapshot& w = *c.worker;
    // Unknown capacity is treated as full: prefer workers we know have room.
    if (w.kv_capacity_blocks == 0) return 1.0;
    return std::min(1.0, static_cast<double>(w.active_kv_blocks) / w.kv_capacity_blocks);
  });
}

std::shared_ptr<const Scorer> NewPrefixMissScorer() {
  return Make("prefix_miss", kCacheView, [](const RequestProfile& r, const Candidate& c) -> Result {
    return 1.0 - PrefixHitRatio(r, c.cache);
  });
}

std::shared_ptr<const Scorer> NewTokenLoadScorer(const TokenLoadOptions& options) {
  return Make("token_load", kCacheView | kRouterLoad,
              [options](const RequestProfile& r, const Candidate& c) -> Result {
                const double hit = PrefixHitRatio(r, c.cache);
                const double tokens = static_cast<double>(c.worker->pending_prefill_tokens) +
                                      static_cast<double>(r.prompt_tokens) * (1.0 - hit);
                return std::min(1.0, tokens / options.token_limit);
              });
}

std::shared_ptr<const Scorer> NewDynamoCostScorer(const DynamoCostOptions& o) {
  return Make(
      "dynamo_cost", kCacheView | kRouterLoad,
      [o](const RequestProfile& r, const Candidate& c) -> Result {
        const WorkerSnapshot& w = *c.worker;
        const double bs = r.block_size;
        const LayeredHits hits = LayerHits(c.cache, r.num_full_blocks);
        const auto tier = [&](Tier t) {
          return static_cast<double>(hits.blocks[static_cast<int>(t)]);
        };
        const double raw_prefill_blocks =
            static_cast<double>(w.pending_prefill_tokens + r.prompt_tokens) / bs;
        const double credit = tier(Tier::kGpu) * 1.0 + tier(Tier::kCpu) * o.host_weight +
                              tier(Tier::kDisk) * o.disk_weight +
                              tier(Tier::kShared) * o.shared_weight;
        const std::uint64_t request_blocks = (r.prompt_tokens + r.block_size - 1) / r.block_size;
        const std::uint64_t gpu_held = hits.blocks[static_cast<int>(Tier::kGpu)];
        const double decode_blocks = static_cast<double>(
            w.active_kv_blocks + (request_blocks > gpu_held ? request_blocks - gpu_held : 0));
        return o.prefill_load_scale * std::max(0.0, raw_prefill_blocks - credit) + decode_blocks +
               o.active_request_weight * w.inflight_requests;
      });
}

std::shared_ptr<const Scorer> NewPredictedTtftScorer(const TtftTerms& terms) {
  // The KV term reads the engine's scraped usage when there is one (HeldKvBlocks).
  const Inputs needs =
      kCacheView | kRouterLoad | kRates | (terms.kv_wait > 0 ? kScrapedMetrics : kNoInputs);
  return Make(
      "predicted_ttft", needs, [terms](const RequestProfile& r, const Candidate& c) -> Result {
        std::expected<TtftPrediction, std::string> p = PredictTtft(r, c.cache, *c.worker, terms);
        if (!p) {
          return std::unexpected(SchedError{SchedError::Code::kMissingInput,
                                            fmt::format("scorer 'predicted_ttft': {}", p.error())});
        }
        return p->total_s();
      });
}

std::shared_ptr<const Scorer> NewDecodeSlowdownScorer(const SlowdownTerms& terms) {
  return Make("decode_slowdown", kCacheView | kRouterLoad | kRates,
              [terms](const RequestProfile& r, const Candidate& c) -> Result {
                auto d = PredictDecodeSlowdown(r, c.cache, *c.worker, terms);
                if (!d) {
                  return std::unexpected(
                      SchedError{SchedError::Code::kMissingInput,
                                 fmt::format("scorer 'decode_slowdown': {}", d.error())});
                }
                return d->total_s();
              });
}

// The plug-ins' YAML options (sched/registry.h's format), parsed beside the plug-ins they build.
void RegisterBuiltinScorers(Registry& registry) {
  using Unexpected = std::unexpected<ConfigError>;
  using Made = std::expected<std::shared_ptr<const Scorer>, ConfigError>;
  [[maybe_unused]] constexpr double kInf = std::numeric_limits<double>::infinity();
  registry.AddScorer("inflight_requests",
              [](Params&) -> Made { return NewInflightRequestsScorer(); });
  registry.AddScorer("inflight_normalized",
              [](Params&) -> Made { return NewInflightNormalizedScorer(); });
  registry.AddScorer("engine_queue", [](Params&) -> Made { return NewEngineQueueScorer(); });
  registry.AddScorer("kv_usage", [](Params&) -> Made { return NewKvUsageScorer(); });
  registry.AddScorer("prefix_miss", [](Params&) -> Made { return NewPrefixMissScorer(); });
  registry.AddScorer("predicted_ttft", [](Params& p) -> Made {
    TtftTerms t = kFullTtftModel;
    auto decode = p.Number("decode_load", t.decode_load, 0, kInf);
    if (!decode) return Unexpected(decode.error());
    auto kv = p.Number("kv_wait", t.kv_wait, 0, kInf);
    if (!kv) return Unexpected(kv.error());
    auto tier_queue = p.Number("tier_queue", t.tier_queue, 0, kInf);
    if (!tier_queue) return Unexpected(tier_queue.error());
    auto chunk = p.Number("chunk_tokens", t.chunk_tokens, 1, 1 << 24);
    if (!chunk) return Unexpected(chunk.error());
    t.decode_load = *decode;
    t.kv_wait = *kv;
    t.tier_queue = *tier_queue;
    t.chunk_tokens = static_cast<std::uint32_t>(*chunk);
    return NewPredictedTtftScorer(t);
  });
  registry.AddScorer("decode_slowdown", [](Params& p) -> Made {
    SlowdownTerms t;
    auto others = p.Number("others_share", t.others_share, 0, 1);
    if (!others) return Unexpected(others.error());
    auto stall = p.Number("stall", t.stall, 0, kInf);
    if (!stall) return Unexpected(stall.error());
    auto pending = p.Number("pending", t.pending, 0, kInf);
    if (!pending) return Unexpected(pending.error());
    auto chunk = p.Number("chunk_tokens", t.chunk_tokens, 1, 1 << 24);
    if (!chunk) return Unexpected(chunk.error());
    t.others_share = *others;
    t.stall = *stall;
    t.pending = *pending;
    t.chunk_tokens = static_cast<std::uint32_t>(*chunk);
    return NewDecodeSlowdownScorer(t);
  });
  registry.AddScorer("token_load", [](Params& p) -> Made {
    TokenLoadOptions o;
    auto limit = p.Number("token_limit", o.token_limit, 1, kInf);
    if (!limit) return Unexpected(limit.error());
    o.token_limit = *limit;
    return NewTokenLoadScorer(o);
  });
  registry.AddScorer("dynamo_cost", [](Params& p) -> Made {
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
}

}  // namespace kvroute::sched

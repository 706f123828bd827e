#include "sched/policy.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <unordered_map>

#include "sched/latency_model.h"

namespace kvroute::sched {
namespace {

SchedError Contract(std::string message) {
  return {SchedError::Code::kContract, std::move(message)};
}

// Builds one candidate per worker with its (sanitised) cache view. The first view of a
// worker counts. Callers usually pass both lists ordered by worker id (the simulator and the
// index do), which is matched by one merge walk instead of a hash map per decision.
std::vector<Candidate> BuildCandidates(const RequestProfile& request,
                                       std::span<const WorkerSnapshot> workers) {
  std::vector<Candidate> out;
  out.reserve(workers.size());
  for (const WorkerSnapshot& w : workers) out.push_back(Candidate{&w, CacheView{.worker = w.id}});
  const auto& views = request.cache_views;
  const bool views_sorted = std::ranges::adjacent_find(views, [](const auto& a, const auto& b) {
                              return a.worker >= b.worker;
                            }) == views.end();
  const bool workers_sorted = std::ranges::adjacent_find(workers, [](const auto& a, const auto& b) {
                                return a.id > b.id;
                              }) == workers.end();
  if (views_sorted && workers_sorted) {
    std::size_t v = 0;
    for (Candidate& c : out) {
      while (v < views.size() && views[v].worker < c.worker->id) ++v;
      if (v < views.size() && views[v].worker == c.worker->id) c.cache = views[v];
    }
  } else {
    std::unordered_map<WorkerId, const CacheView*> by_worker;
    for (const CacheView& v : views) by_worker.emplace(v.worker, &v);
    for (Candidate& c : out) {
      if (auto it = by_worker.find(c.worker->id); it != by_worker.end()) c.cache = *it->second;
    }
  }
  for (Candidate& c : out) {
    for (std::uint32_t d : c.cache.depth_blocks) {
      c.cache.any_depth_blocks = std::max(c.cache.any_depth_blocks, d);
    }
  }
  return out;
}

}  // namespace

const char* IfAllDroppedName(IfAllDropped rule) {
  return rule == IfAllDropped::kFail ? "fail" : "keep_all";
}

Policy::Policy(std::string name, std::vector<FilterStep> filters, std::vector<ScorerStep> scorers,
               std::shared_ptr<const Picker> picker, std::string effective_config)
    : name_(std::move(name)),
      filters_(std::move(filters)),
      scorers_(std::move(scorers)),
      picker_(std::move(picker)),
      effective_config_(std::move(effective_config)) {
  assert(picker_ != nullptr);
  for (const FilterStep& f : filters_) {
    assert(f.filter != nullptr);
    inputs_ |= f.filter->Needs();
  }
  for (const ScorerStep& s : scorers_) {
    assert(s.scorer != nullptr);
    assert(std::isfinite(s.weight) && s.weight >= 0);
    inputs_ |= s.scorer->Needs();
  }
}

std::expected<Decision, SchedError> Policy::Decide(const RequestProfile& request,
                                                   std::span<const WorkerSnapshot> workers,
                                                   PolicyState& state, TraceDetail detail) const {
  if (request.block_size == 0) {
    return std::unexpected(SchedError{SchedError::Code::kInvalidRequest, "block_size is 0"});
  }
  const bool full = detail == TraceDetail::kFull;
  Decision d;
  d.policy = name_;
  d.picker = std::string(picker_->Name());
  for (const ScorerStep& s : scorers_)
    d.scorers.push_back({std::string(s.scorer->Name()), s.weight});

  const std::vector<Candidate> all = BuildCandidates(request, workers);
  if (full) {
    d.candidates.reserve(all.size());
    for (const Candidate& c : all) {
      d.candidates.push_back(
          {.worker = c.worker->id, .name = c.worker->name, .cache_stale = c.cache.stale});
    }
  }
  // alive[i] indexes into `all` (and, in full detail, d.candidates).
  std::vector<std::size_t> alive(all.size());
  for (std::size_t i = 0; i < alive.size(); ++i) alive[i] = i;
  if (alive.empty()) {
    d.why_none = "no workers in the snapshot";
    return d;
  }

  std::vector<Candidate> rows;
  rows.reserve(all.size());
  auto gather = [&] {
    rows.clear();
    for (std::size_t i : alive) rows.push_back(all[i]);
  };

  std::vector<std::size_t> next;
  next.reserve(all.size());
  // Full detail keeps the reason strings for the trace; chosen-only asks for keep flags
  // alone (Filter::Keep), the same verdicts without formatting a reason per dropped worker.
  std::vector<FilterVerdict> verdicts;
  std::vector<char> keep;
  for (const FilterStep& step : filters_) {
    gather();
    const std::string_view fname = step.filter->Name();
    if (full) {
      auto applied = step.filter->Apply(request, rows);
      if (!applied) return std::unexpected(std::move(applied.error()));
      verdicts = std::move(*applied);
      keep.clear();
      for (const FilterVerdict& v : verdicts) keep.push_back(v.keep ? 1 : 0);
    } else {
      auto kept = step.filter->Keep(request, rows, &keep);
      if (!kept) return std::unexpected(std::move(kept.error()));
    }
    if (keep.size() != rows.size()) {
      return std::unexpected(Contract(fmt::format(
          "filter '{}' returned {} verdicts for {} candidates", fname, keep.size(), rows.size())));
    }
    const bool any_kept = std::ranges::any_of(keep, [](char k) { return k != 0; });
    if (!any_kept && step.if_all_dropped == IfAllDropped::kKeepAll) {
      d.notes.push_back(fmt::format("filter '{}' would drop all {} candidates; skipped (keep_all)",
                                    fname, rows.size()));
      continue;
    }
    next.clear();
    for (std::size_t k = 0; k < rows.size(); ++k) {
      if (keep[k] != 0) {
        next.push_back(alive[k]);
      } else if (full) {
        CandidateTrace& trace = d.candidates[alive[k]];
        trace.dropped_by = std::string(fname);
        trace.drop_reason = std::move(verdicts[k].reason);
      }
    }
    std::swap(alive, next);
    if (alive.empty()) {
      d.why_none = fmt::format("filter '{}' dropped every candidate", fname);
      return d;
    }
  }

  gather();
  const std::size_t n = rows.size();
  const std::size_t num_scorers = scorers_.size();
  std::vector<double> totals(n, 0.0);
  // costs[k * num_scorers + s]: raw cost of row k under scorer s.
  std::vector<double> costs(n * num_scorers);
  for (std::size_t s = 0; s < num_scorers; ++s) {
    const ScorerStep& step = scorers_[s];
    const std::string_view sname = step.scorer->Name();
    auto scored = step.scorer->Score(request, rows);
    if (!scored) return std::unexpected(std::move(scored.error()));
    if (scored->size() != n) {
      return std::unexpected(
          SchedError{SchedError::Code::kInvalidCost,
                     fmt::format("scorer '{}' returned {} costs for {} candidates", sname,
                                 scored->size(), n)});
    }
    for (std::size_t k = 0; k < n; ++k) {
      const double cost = (*scored)[k];
      if (!std::isfinite(cost)) {
        return std::unexpected(
            SchedError{SchedError::Code::kInvalidCost,
                       fmt::format("scorer '{}' returned non-finite cost {} for worker {}", sname,
                                   cost, rows[k].worker->id)});
      }
      costs[k * num_scorers + s] = cost;
      totals[k] += step.weight * cost;
    }
  }
  std::vector<PickRow> pick_rows(n);
  for (std::size_t k = 0; k < n; ++k) {
    if (!std::isfinite(totals[k])) {
      return std::unexpected(
          SchedError{SchedError::Code::kInvalidCost,
                     fmt::format("total cost overflowed for worker {}", rows[k].worker->id)});
    }
    pick_rows[k] = {rows[k].worker->id, totals[k]};
  }

  auto picked = picker_->Pick(pick_rows, state);
  if (!picked) return std::unexpected(std::move(picked.error()));
  if (picked->row >= n) {
    return std::unexpected(Contract(
        fmt::format("picker '{}' returned row {} of {}", picker_->Name(), picked->row, n)));
  }
  if (!picked->probabilities.empty() && picked->probabilities.size() != n) {
    return std::unexpected(Contract(fmt::format("picker '{}' returned {} probabilities for {} rows",
                                                picker_->Name(), picked->probabilities.size(), n)));
  }
  d.chosen = pick_rows[picked->row].worker;

  // The survivors' traces: every one in full detail, only the chosen one otherwise.
  auto fill = [&](std::size_t k, CandidateTrace& trace) {
    trace.costs.assign(costs.begin() + static_cast<std::ptrdiff_t>(k * num_scorers),
                       costs.begin() + static_cast<std::ptrdiff_t>((k + 1) * num_scorers));
    trace.total_cost = totals[k];
    if (!picked->probabilities.empty()) trace.probability = picked->probabilities[k];
    if (inputs_ & kRates) {
      // The full model when the worker has what it needs (the decode and KV terms need a
      // decode model), the basic one otherwise.
      auto ttft = PredictTtft(request, rows[k].cache, *rows[k].worker, kFullTtftModel);
      if (!ttft) ttft = PredictTtft(request, rows[k].cache, *rows[k].worker);
      if (ttft) {
        trace.predicted_ttft_s = ttft->total_s();
        trace.predicted_wait_s = ttft->wait_s();
      }
      if (auto itl = PredictItl(request, rows[k].cache, *rows[k].worker))
        trace.predicted_itl_s = *itl;
    }
  };
  if (full) {
    for (std::size_t k = 0; k < n; ++k) fill(k, d.candidates[alive[k]]);
  } else {
    const std::size_t k = picked->row;
    CandidateTrace trace{.worker = rows[k].worker->id,
                         .name = rows[k].worker->name,
                         .cache_stale = rows[k].cache.stale};
    fill(k, trace);
    d.candidates.push_back(std::move(trace));
  }
  return d;
}

}  // namespace kvroute::sched

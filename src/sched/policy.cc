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

// Builds one candidate per worker with its (sanitised) cache view.
std::vector<Candidate> BuildCandidates(const RequestProfile& request,
                                       std::span<const WorkerSnapshot> workers) {
  std::unordered_map<WorkerId, const CacheView*> views;
  for (const CacheView& v : request.cache_views) views.emplace(v.worker, &v);
  std::vector<Candidate> out;
  out.reserve(workers.size());
  for (const WorkerSnapshot& w : workers) {
    Candidate c{&w, CacheView{.worker = w.id}};
    if (auto it = views.find(w.id); it != views.end()) c.cache = *it->second;
    for (std::uint32_t d : c.cache.depth_blocks) {
      c.cache.any_depth_blocks = std::max(c.cache.any_depth_blocks, d);
    }
    out.push_back(c);
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
                                                   PolicyState& state) const {
  if (request.block_size == 0) {
    return std::unexpected(SchedError{SchedError::Code::kInvalidRequest, "block_size is 0"});
  }
  Decision d;
  d.policy = name_;
  d.picker = std::string(picker_->Name());
  for (const ScorerStep& s : scorers_)
    d.scorers.push_back({std::string(s.scorer->Name()), s.weight});

  const std::vector<Candidate> all = BuildCandidates(request, workers);
  for (const Candidate& c : all) {
    d.candidates.push_back(
        {.worker = c.worker->id, .name = c.worker->name, .cache_stale = c.cache.stale});
  }
  // alive[i] indexes into `all` (and d.candidates).
  std::vector<std::size_t> alive(all.size());
  for (std::size_t i = 0; i < alive.size(); ++i) alive[i] = i;
  if (alive.empty()) {
    d.why_none = "no workers in the snapshot";
    return d;
  }

  std::vector<Candidate> rows;
  auto gather = [&] {
    rows.clear();
    for (std::size_t i : alive) rows.push_back(all[i]);
  };

  for (const FilterStep& step : filters_) {
    gather();
    const std::string_view fname = step.filter->Name();
    auto verdicts = step.filter->Apply(request, rows);
    if (!verdicts) return std::unexpected(std::move(verdicts.error()));
    if (verdicts->size() != rows.size()) {
      return std::unexpected(
          Contract(fmt::format("filter '{}' returned {} verdicts for {} candidates", fname,
                               verdicts->size(), rows.size())));
    }
    const bool any_kept =
        std::ranges::any_of(*verdicts, [](const FilterVerdict& v) { return v.keep; });
    if (!any_kept && step.if_all_dropped == IfAllDropped::kKeepAll) {
      d.notes.push_back(fmt::format("filter '{}' would drop all {} candidates; skipped (keep_all)",
                                    fname, rows.size()));
      continue;
    }
    std::vector<std::size_t> next;
    for (std::size_t k = 0; k < rows.size(); ++k) {
      CandidateTrace& trace = d.candidates[alive[k]];
      if ((*verdicts)[k].keep) {
        next.push_back(alive[k]);
      } else {
        trace.dropped_by = std::string(fname);
        trace.drop_reason = std::move((*verdicts)[k].reason);
      }
    }
    alive = std::move(next);
    if (alive.empty()) {
      d.why_none = fmt::format("filter '{}' dropped every candidate", fname);
      return d;
    }
  }

  gather();
  std::vector<double> totals(rows.size(), 0.0);
  for (const ScorerStep& step : scorers_) {
    const std::string_view sname = step.scorer->Name();
    auto costs = step.scorer->Score(request, rows);
    if (!costs) return std::unexpected(std::move(costs.error()));
    if (costs->size() != rows.size()) {
      return std::unexpected(
          SchedError{SchedError::Code::kInvalidCost,
                     fmt::format("scorer '{}' returned {} costs for {} candidates", sname,
                                 costs->size(), rows.size())});
    }
    for (std::size_t k = 0; k < rows.size(); ++k) {
      const double cost = (*costs)[k];
      if (!std::isfinite(cost)) {
        return std::unexpected(
            SchedError{SchedError::Code::kInvalidCost,
                       fmt::format("scorer '{}' returned non-finite cost {} for worker {}", sname,
                                   cost, rows[k].worker->id)});
      }
      d.candidates[alive[k]].costs.push_back(cost);
      totals[k] += step.weight * cost;
    }
  }
  std::vector<PickRow> pick_rows(rows.size());
  for (std::size_t k = 0; k < rows.size(); ++k) {
    if (!std::isfinite(totals[k])) {
      return std::unexpected(
          SchedError{SchedError::Code::kInvalidCost,
                     fmt::format("total cost overflowed for worker {}", rows[k].worker->id)});
    }
    pick_rows[k] = {rows[k].worker->id, totals[k]};
    d.candidates[alive[k]].total_cost = totals[k];
  }

  auto picked = picker_->Pick(pick_rows, state);
  if (!picked) return std::unexpected(std::move(picked.error()));
  if (picked->row >= pick_rows.size()) {
    return std::unexpected(Contract(fmt::format("picker '{}' returned row {} of {}",
                                                picker_->Name(), picked->row, pick_rows.size())));
  }
  if (!picked->probabilities.empty()) {
    if (picked->probabilities.size() != pick_rows.size()) {
      return std::unexpected(
          Contract(fmt::format("picker '{}' returned {} probabilities for {} rows", picker_->Name(),
                               picked->probabilities.size(), pick_rows.size())));
    }
    for (std::size_t k = 0; k < rows.size(); ++k) {
      d.candidates[alive[k]].probability = picked->probabilities[k];
    }
  }
  d.chosen = pick_rows[picked->row].worker;

  if (inputs_ & kRates) {
    for (std::size_t k = 0; k < rows.size(); ++k) {
      CandidateTrace& trace = d.candidates[alive[k]];
      if (auto ttft = PredictTtft(request, rows[k].cache, *rows[k].worker)) {
        trace.predicted_ttft_s = ttft->total_s();
      }
      if (auto itl = PredictItl(request, rows[k].cache, *rows[k].worker))
        trace.predicted_itl_s = *itl;
    }
  }
  return d;
}

}  // namespace kvroute::sched

#include "gateway/parity.h"

#include <algorithm>
#include <cstdio>

namespace kvroute::gateway {

const char* ParityCauseName(ParityCause cause) {
  switch (cause) {
    case ParityCause::kBlockSizeMismatch:
      return "block_size_mismatch";
    case ParityCause::kNoEvents:
      return "no_events";
    case ParityCause::kTokenizerMismatch:
      return "tokenizer_mismatch";
    case ParityCause::kEvictionPressure:
      return "eviction_pressure";
  }
  return "unknown";
}

ParityChecker::ParityChecker(ParityOptions options, ParityIndexView initial)
    : options_(options), initial_(initial) {}

void ParityChecker::OnRouted(RequestId id, WorkerId worker, std::vector<kv::BlockKey> keys,
                             Nanos now) {
  if (keys.empty()) return;
  std::lock_guard lock(mu_);
  if (pending_.contains(id)) return;
  while (pending_.size() >= std::max<std::size_t>(options_.max_pending, 1) && !order_.empty()) {
    RequestId oldest = order_.front();
    order_.pop_front();
    if (pending_.erase(oldest) > 0) ++dropped_;
  }
  pending_.emplace(id, Pending{.worker = worker, .keys = std::move(keys), .routed_at = now});
  order_.push_back(id);
}

void ParityChecker::OnFirstToken(RequestId id, Nanos now) {
  std::lock_guard lock(mu_);
  auto it = pending_.find(id);
  if (it != pending_.end() && !it->second.first_token_at) it->second.first_token_at = now;
}

void ParityChecker::OnFailed(RequestId id) {
  std::lock_guard lock(mu_);
  pending_.erase(id);  // its order_ entry is skipped when it reaches the front
}

void ParityChecker::AddLocked(Window& w, Final f) const {
  ++w.counters.samples;
  w.counters.predicted_blocks += f.predicted;
  w.counters.confirmed_blocks += f.confirmed;
  if (f.confirmed > 0) ++w.counters.first_block_confirmed;
  w.recent.push_back(f);
  while (w.recent.size() > std::max<std::size_t>(options_.min_samples, 1)) w.recent.pop_front();
}

void ParityChecker::ConfirmLocked(Nanos now, const LookupFn& lookup) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    Pending& p = it->second;
    if (!p.first_token_at) {
      if (now - p.routed_at > options_.max_wait_first_token) {
        ++dropped_;
        it = pending_.erase(it);
      } else {
        ++it;
      }
      continue;
    }
    if (*p.first_token_at <= now) {
      p.best_depth = std::max(p.best_depth, lookup(p.worker, p.keys));
    }
    if (p.best_depth >= p.keys.size() || now - *p.first_token_at >= options_.window) {
      const Final f{.predicted = static_cast<std::uint32_t>(p.keys.size()),
                    .confirmed = std::min<std::uint32_t>(
                        p.best_depth, static_cast<std::uint32_t>(p.keys.size()))};
      AddLocked(all_, f);
      AddLocked(per_worker_[p.worker], f);
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
  while (!order_.empty() && !pending_.contains(order_.front())) order_.pop_front();
}

std::optional<ParityWarning> ParityChecker::JudgeLocked(Window& w, const ParityIndexView& index,
                                                        const ParityIndexView& baseline) const {
  if (w.recent.size() < std::max<std::size_t>(options_.min_samples, 1)) return std::nullopt;
  std::uint64_t predicted = 0, confirmed = 0;
  std::size_t first_confirmed = 0;
  for (const Final& f : w.recent) {
    predicted += f.predicted;
    confirmed += f.confirmed;
    first_confirmed += f.confirmed > 0 ? 1 : 0;
  }
  const double ratio = predicted == 0 ? 1.0 : static_cast<double>(confirmed) / predicted;
  if (ratio >= options_.warn_ratio) {
    w.armed = true;
    return std::nullopt;
  }
  if (!w.armed) return std::nullopt;
  w.armed = false;
  ++w.counters.warnings;

  ParityCause cause = ParityCause::kEvictionPressure;
  if (index.last_event_block_size != 0 && index.last_event_block_size != index.keyer_block_size) {
    cause = ParityCause::kBlockSizeMismatch;
  } else if (index.batches <= baseline.batches) {
    cause = ParityCause::kNoEvents;
  } else if (index.blocks_stored > baseline.blocks_stored &&
             first_confirmed * 20 < w.recent.size()) {
    // Blocks are being stored, yet (almost) no prompt of ours matches even its first block:
    // the engine hashes different token ids than we do.
    cause = ParityCause::kTokenizerMismatch;
  }
  ParityWarning out{.cause = cause, .ratio = ratio, .samples = w.recent.size()};
  char head[160];
  std::snprintf(head, sizeof head,
                "KV parity: only %.1f%% of predicted blocks confirmed by engine events over the "
                "last %zu requests; likely cause: %s. ",
                ratio * 100, w.recent.size(), ParityCauseName(cause));
  out.message = head;
  switch (cause) {
    case ParityCause::kBlockSizeMismatch:
      out.message += "Engine events carry block_size " +
                     std::to_string(index.last_event_block_size) + " but kvroute keys blocks of " +
                     std::to_string(index.keyer_block_size) +
                     " tokens: set block_size to the engines' value.";
      break;
    case ParityCause::kNoEvents:
      out.message +=
          "No KV event batch has arrived: check the workers' kv_events endpoints and that the "
          "engines run with --kv-events-config (enable_kv_cache_events).";
      break;
    case ParityCause::kTokenizerMismatch:
      out.message +=
          "Events arrive but not even the first block of our prompts matches: the tokenizer, "
          "chat template or LoRA/salt differs from the engine's.";
      break;
    case ParityCause::kEvictionPressure:
      out.message +=
          "Blocks are confirmed only partly: the engines evict prompts before or soon after "
          "they finish (KV cache too small for the load).";
      break;
  }
  return out;
}

std::optional<ParityWarning> ParityChecker::Check(Nanos now, const LookupFn& lookup,
                                                  const ParityIndexView& index) {
  std::lock_guard lock(mu_);
  ConfirmLocked(now, lookup);
  return JudgeLocked(all_, index, initial_);
}

ParityReport ParityChecker::CheckAll(Nanos now, const LookupFn& lookup,
                                     const ParityIndexView& index,
                                     const WorkerViewFn& worker_view) {
  std::lock_guard lock(mu_);
  ConfirmLocked(now, lookup);
  ParityReport report;
  report.global = JudgeLocked(all_, index, initial_);
  for (auto& [worker, window] : per_worker_) {
    // A worker's feed counters start from 0 with the feed: no baseline to subtract.
    if (auto w = JudgeLocked(window, worker_view(worker), ParityIndexView{})) {
      w->worker = worker;
      report.workers.push_back(std::move(*w));
    }
  }
  return report;
}

ParityCounters ParityChecker::counters() const {
  std::lock_guard lock(mu_);
  ParityCounters c = all_.counters;
  c.dropped = dropped_;
  return c;
}

std::map<WorkerId, ParityCounters> ParityChecker::WorkerCounters() const {
  std::lock_guard lock(mu_);
  std::map<WorkerId, ParityCounters> out;
  for (const auto& [worker, window] : per_worker_) out.emplace(worker, window.counters);
  return out;
}

}  // namespace kvroute::gateway

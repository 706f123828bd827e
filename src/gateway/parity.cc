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
    if (pending_.erase(oldest) > 0) ++counters_.dropped;
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

void ParityChecker::FinalizeLocked(const Pending& p) {
  Final f{.predicted = static_cast<std::uint32_t>(p.keys.size()),
          .confirmed =
              std::min<std::uint32_t>(p.best_depth, static_cast<std::uint32_t>(p.keys.size()))};
  ++counters_.samples;
  counters_.predicted_blocks += f.predicted;
  counters_.confirmed_blocks += f.confirmed;
  if (f.confirmed > 0) ++counters_.first_block_confirmed;
  recent_.push_back(f);
  while (recent_.size() > std::max<std::size_t>(options_.min_samples, 1)) recent_.pop_front();
}

ParityCause ParityChecker::CauseLocked(const ParityIndexView& index) const {
  if (index.last_event_block_size != 0 && index.last_event_block_size != index.keyer_block_size) {
    return ParityCause::kBlockSizeMismatch;
  }
  if (index.batches <= initial_.batches) return ParityCause::kNoEvents;
  std::size_t first_confirmed = 0;
  for (const Final& f : recent_) first_confirmed += f.confirmed > 0 ? 1 : 0;
  // Blocks are being stored, yet (almost) no prompt of ours matches even its first block:
  // the engine hashes different token ids than we do.
  if (index.blocks_stored > initial_.blocks_stored && first_confirmed * 20 < recent_.size()) {
    return ParityCause::kTokenizerMismatch;
  }
  return ParityCause::kEvictionPressure;
}

std::optional<ParityWarning> ParityChecker::Check(Nanos now, const LookupFn& lookup,
                                                  const ParityIndexView& index) {
  std::lock_guard lock(mu_);
  for (auto it = pending_.begin(); it != pending_.end();) {
    Pending& p = it->second;
    if (!p.first_token_at) {
      if (now - p.routed_at > options_.max_wait_first_token) {
        ++counters_.dropped;
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
      FinalizeLocked(p);
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
  while (!order_.empty() && !pending_.contains(order_.front())) order_.pop_front();

  if (recent_.size() < std::max<std::size_t>(options_.min_samples, 1)) return std::nullopt;
  std::uint64_t predicted = 0, confirmed = 0;
  for (const Final& f : recent_) {
    predicted += f.predicted;
    confirmed += f.confirmed;
  }
  double ratio = predicted == 0 ? 1.0 : static_cast<double>(confirmed) / predicted;
  if (ratio >= options_.warn_ratio) {
    armed_ = true;
    return std::nullopt;
  }
  if (!armed_) return std::nullopt;
  armed_ = false;
  ++counters_.warnings;
  ParityWarning w{.cause = CauseLocked(index), .ratio = ratio, .samples = recent_.size()};
  char head[160];
  std::snprintf(head, sizeof head,
                "KV parity: only %.1f%% of predicted blocks confirmed by engine events over the "
                "last %zu requests; likely cause: %s. ",
                ratio * 100, recent_.size(), ParityCauseName(w.cause));
  w.message = head;
  switch (w.cause) {
    case ParityCause::kBlockSizeMismatch:
      w.message += "Engine events carry block_size " + std::to_string(index.last_event_block_size) +
                   " but kvroute keys blocks of " + std::to_string(index.keyer_block_size) +
                   " tokens: set block_size to the engines' value.";
      break;
    case ParityCause::kNoEvents:
      w.message +=
          "No KV event batch has arrived: check the workers' kv_events endpoints and that the "
          "engines run with --kv-events-config (enable_kv_cache_events).";
      break;
    case ParityCause::kTokenizerMismatch:
      w.message +=
          "Events arrive but not even the first block of our prompts matches: the tokenizer, "
          "chat template or LoRA/salt differs from the engine's.";
      break;
    case ParityCause::kEvictionPressure:
      w.message +=
          "Blocks are confirmed only partly: the engines evict prompts before or soon after "
          "they finish (KV cache too small for the load).";
      break;
  }
  return w;
}

ParityCounters ParityChecker::counters() const {
  std::lock_guard lock(mu_);
  return counters_;
}

}  // namespace kvroute::gateway

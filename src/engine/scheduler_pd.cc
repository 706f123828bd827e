// Scheduler, the prefill/decode disaggregation half: pinned prefill legs (prefill side) and
// decode legs pulling remote KV over the SharedLink (decode side). See scheduler.h.
#include <algorithm>

#include "engine/scheduler.h"

namespace kvroute::engine {

void Scheduler::Pin(Request* req, Nanos finished_at) {
  Pinned& p = pinned_[req->spec.id];
  p.blocks = std::move(req->blocks);  // the references move with them: nothing is freed
  p.num_prompt_tokens = req->num_prompt_tokens;
  p.deadline = finished_at + config_.pinned_kv_timeout;
  num_pinned_blocks_ += static_cast<std::int64_t>(p.blocks.size());
  req->blocks.clear();
  req->num_cached_blocks = 0;
}

std::optional<PinnedKv> Scheduler::FindPinned(const std::string& request_id) const {
  auto it = pinned_.find(request_id);
  if (it == pinned_.end()) return std::nullopt;
  return PinnedKv{.block_ids = {it->second.blocks.begin(), it->second.blocks.end()},
                  .num_prompt_tokens = it->second.num_prompt_tokens,
                  .deadline = it->second.deadline};
}

bool Scheduler::ReleasePinned(const std::string& request_id) {
  auto it = pinned_.find(request_id);
  if (it == pinned_.end()) return false;
  // Tail first, as any finished request's blocks (see FreeBlocks).
  reversed_.assign(it->second.blocks.rbegin(), it->second.blocks.rend());
  pool_.Free(reversed_);
  num_pinned_blocks_ -= static_cast<std::int64_t>(it->second.blocks.size());
  pinned_.erase(it);
  ++stats_.pins_released;
  return true;
}

void Scheduler::ExpirePins(Nanos now, StepResult* out) {
  std::vector<std::string> expired;
  for (const auto& [id, p] : pinned_) {
    if (p.deadline <= now) expired.push_back(id);
  }
  std::sort(expired.begin(), expired.end());  // deterministic order
  for (const std::string& id : expired) {
    ReleasePinned(id);
    --stats_.pins_released;  // counted as expired, not released
    ++stats_.pins_expired;
    out->pins_expired.push_back(id);
  }
}

std::optional<Nanos> Scheduler::NextTimedEvent() const {
  std::optional<Nanos> next = link_.NextCompletion();
  for (const Request* req : tier_loading_) {
    if (!next || req->tier_ready < *next) next = req->tier_ready;
  }
  for (const auto& [id, p] : pinned_) {
    if (!next || p.deadline < *next) next = p.deadline;
  }
  return next;
}

void Scheduler::StartRemoteLoad(Request* req, std::uint32_t local_hit_blocks, Nanos now) {
  const std::uint32_t bs = config_.block_size;
  // Whole blocks move (the partial last block too): what NIXL reads is block-sized.
  const auto total_blocks = static_cast<std::uint32_t>((req->num_prompt_tokens + bs - 1) / bs);
  req->pulled_blocks = total_blocks - std::min(total_blocks, local_hit_blocks);
  const std::uint32_t decode_tp = profile_.hardware.num_gpus;
  const double bytes = static_cast<double>(req->pulled_blocks) * bs *
                       KvTransferBytesPerToken(profile_.model, decode_tp);
  req->remote_pending = false;
  req->loading = true;
  req->transfer_id = next_transfer_id_++;
  loading_[req->transfer_id] = req;
  link_.Start(req->transfer_id, bytes,
              KvTransferLanes(req->spec.remote_prefill->prefill_tp, decode_tp), now);
}

void Scheduler::TakeArrivedKv(Nanos now, StepResult* out) {
  if (loading_.empty()) return;
  for (const SharedLink::Finished& f : link_.AdvanceTo(now)) {
    auto it = loading_.find(f.id);
    if (it == loading_.end()) continue;
    Request* req = it->second;
    loading_.erase(it);
    req->loading = false;
    req->loaded = true;
    // The whole prompt's KV is here; vLLM still recomputes the last prompt token, whose
    // logits give the first output token.
    req->num_computed = req->num_prompt_tokens - 1;
    req->cached_tokens = static_cast<std::uint32_t>(req->num_computed);
    // Pulled full blocks are announced as if computed here (BlockStored "GPU").
    CacheFullBlocks(req, &out->kv_events);
    loaded_.push_back(req);
    ++stats_.kv_transfers;
    stats_.kv_transfer_blocks += req->pulled_blocks;
    stats_.kv_transfer_bytes += f.bytes;
    out->kv_transfers_done.push_back({.request_id = req->spec.id,
                                      .blocks = req->pulled_blocks,
                                      .bytes = f.bytes,
                                      .started = f.started,
                                      .finished = f.finished});
  }
}

void Scheduler::ScheduleLoaded(std::uint32_t* budget, std::vector<Scheduled>* out) {
  while (!loaded_.empty() && *budget > 0 && running_.size() < config_.max_num_seqs) {
    Request* req = loaded_.front();
    const std::uint64_t num_new = req->num_tokens() - req->num_computed;  // 1: blocks exist
    if (num_new > *budget) break;
    loaded_.pop_front();
    req->loaded = false;
    req->running = true;
    running_.push_back(req);
    out->push_back({req, static_cast<std::uint32_t>(num_new), req->num_computed});
    *budget -= static_cast<std::uint32_t>(num_new);
  }
}

void Scheduler::DropNotRunning(Request* req) {
  if (req->tier_loading) {
    tier_loading_.erase(std::find(tier_loading_.begin(), tier_loading_.end(), req));
    FreeBlocks(req);
  } else if (req->loading) {
    link_.Cancel(req->transfer_id);
    loading_.erase(req->transfer_id);
    FreeBlocks(req);
  } else if (req->loaded) {
    loaded_.erase(std::find(loaded_.begin(), loaded_.end(), req));
    FreeBlocks(req);
  } else {
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), req));
  }
}

}  // namespace kvroute::engine

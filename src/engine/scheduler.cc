#include "engine/scheduler.h"

#include <algorithm>

namespace kvroute::engine {

Scheduler::Scheduler(const Profile& profile, const EngineConfig& config,
                     std::int64_t num_gpu_blocks)
    : profile_(profile),
      config_(config),
      step_time_(profile_),
      hasher_(config_.block_size, config_.event_hash, config_.python_hash_seed),
      disk_tier_(config_.disk.num_blocks, config_.block_size, "DISK"),
      cpu_tier_(config_.num_cpu_blocks, config_.block_size, "CPU",
                config_.disk.num_blocks > 0 ? &disk_tier_ : nullptr),
      // Evictions go to the host tier, or straight to disk when there is no host tier.
      pool_(num_gpu_blocks, config_.block_size,
            config_.num_cpu_blocks > 0    ? &cpu_tier_
            : config_.disk.num_blocks > 0 ? &disk_tier_
                                          : nullptr),
      link_(config_.kv_link, profile_.hardware.num_gpus) {
  stats_.num_gpu_blocks = pool_.num_blocks();
  stats_.num_cpu_blocks = cpu_tier_.capacity();
  stats_.num_disk_blocks = disk_tier_.capacity();
  lower_tiers_ = cpu_tier_.capacity() > 0 || disk_tier_.capacity() > 0 ||
                 config_.shared.store != nullptr;
  disk_tier_.SetWriteModel(config_.block_size * step_time_.KvBytesPerTokenTransfer(),
                           config_.disk.write_bytes_per_s, config_.disk.max_write_backlog);
}

std::optional<std::string> Scheduler::Add(RequestSpec spec) {
  if (spec.prompt.empty()) return "prompt is empty";
  if (requests_.contains(spec.id)) return "request id '" + spec.id + "' is in use";
  const std::uint64_t total = spec.prompt.size() + std::uint64_t{spec.max_tokens};
  if (total > config_.max_model_len) {
    return "prompt (" + std::to_string(spec.prompt.size()) + " tokens) + max_tokens (" +
           std::to_string(spec.max_tokens) + ") exceeds max_model_len " +
           std::to_string(config_.max_model_len);
  }
  // Without chunked prefill a (re)computation must fit one step's budget, or it would wait
  // forever (vLLM enforces max_num_batched_tokens >= max_model_len in that mode).
  if (!config_.enable_chunked_prefill && total > config_.max_num_batched_tokens) {
    return "prompt + max_tokens (" + std::to_string(total) + ") exceeds max_num_batched_tokens " +
           std::to_string(config_.max_num_batched_tokens) + " with chunked prefill disabled";
  }
  // A request that cannot fit the whole cache would wait forever.
  const std::uint64_t blocks = (total + config_.block_size - 1) / config_.block_size;
  if (static_cast<std::int64_t>(blocks) > pool_.num_blocks()) {
    return "request needs " + std::to_string(blocks) + " KV blocks; the cache has " +
           std::to_string(pool_.num_blocks());
  }
  if (spec.remote_prefill && !(config_.kv_link.bandwidth_bytes_per_s > 0)) {
    return "this engine has no KV link (the profile lists no 'links'), so it cannot pull "
           "remote KV";
  }
  if (spec.remote_prefill && spec.remote_decode) {
    return "a request cannot be both a prefill leg and a decode leg";
  }
  auto req = std::make_unique<Request>(std::move(spec), next_arrival_++, config_.seed);
  hasher_.Extend(req.get());
  waiting_.push_back(req.get());
  Request* added = req.get();
  requests_.emplace(req->spec.id, std::move(req));
  if (config_.shared.store && config_.shared.leases && config_.enable_prefix_caching) {
    if (added->spec.arrived_at) {
      LeaseStoreRun(added, *added->spec.arrived_at);
    } else {
      to_lease_.push_back(added->spec.id);
    }
  }
  return std::nullopt;
}

void Scheduler::Abort(const std::string& request_id) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return;
  Request* req = it->second.get();
  ReleaseStoreLease(req, last_step_);
  if (req->running) {
    FreeBlocks(req);
    running_.erase(std::find(running_.begin(), running_.end(), req));
  } else {
    DropNotRunning(req);
  }
  aborted_.push_back(request_id);
  requests_.erase(it);
}

bool Scheduler::HasWork() const {
  // Legs waiting for remote KV and pinned prefills are timed events (NextTimedEvent).
  return !waiting_.empty() || !running_.empty() || !aborted_.empty() || pending_clear_ ||
         !loaded_.empty();
}

std::int64_t Scheduler::BlocksNeeded(const Request& req, std::uint64_t num_new) const {
  const std::uint64_t bs = config_.block_size;
  const auto want = static_cast<std::int64_t>((req.num_computed + num_new + bs - 1) / bs);
  return std::max<std::int64_t>(0, want - static_cast<std::int64_t>(req.blocks.size()));
}

void Scheduler::FreeBlocks(Request* req) {
  // Tail first, so the free queue evicts a sequence's tail before its (more shared) head.
  reversed_.assign(req->blocks.rbegin(), req->blocks.rend());
  pool_.Free(reversed_);
  req->blocks.clear();
  req->num_cached_blocks = 0;
}

void Scheduler::Preempt(Request* req) {
  FreeBlocks(req);
  req->num_computed = 0;
  req->running = false;
  waiting_.push_front(req);
  ++stats_.num_preemptions;
}

bool Scheduler::ScheduleRunning(std::uint32_t* budget, std::vector<Scheduled>* out,
                                std::vector<kv::KvEvent>* events) {
  bool preempted = false;
  for (std::size_t i = 0; i < running_.size() && *budget > 0; ++i) {
    Request* req = running_[i];
    std::uint64_t num_new = req->num_tokens() - req->num_computed;
    if (num_new == 0) continue;
    if (!config_.enable_chunked_prefill && num_new > *budget) continue;
    num_new = std::min<std::uint64_t>(num_new, *budget);
    bool self_preempted = false;
    std::vector<BlockId>& fresh = fresh_;
    fresh.clear();
    while (!pool_.Allocate(BlocksNeeded(*req, num_new), events, &fresh)) {
      // Victims come from the back, past index i, so nothing already scheduled is touched.
      Request* victim = running_.back();
      running_.pop_back();
      Preempt(victim);
      preempted = true;
      if (victim == req) {
        self_preempted = true;
        break;
      }
    }
    if (self_preempted) break;
    req->blocks.insert(req->blocks.end(), fresh.begin(), fresh.end());
    out->push_back({req, static_cast<std::uint32_t>(num_new), req->num_computed});
    *budget -= static_cast<std::uint32_t>(num_new);
  }
  return preempted;
}

BlockMeta Scheduler::MetaFor(const Request& req, std::size_t i) const {
  BlockMeta m;
  m.key = req.keys[i];
  m.hash = req.hashes[i];
  if (i > 0) m.parent_hash = req.hashes[i - 1];
  if (lower_tiers_) {
    const auto begin = req.tokens.begin() + i * config_.block_size;
    BlockPayload payload{.tokens = {begin, begin + config_.block_size},
                         .lora_name = req.spec.lora_name};
    if (!req.extra_key_inputs().empty()) {
      payload.extra_keys = req.BlockExtraKeys(i, config_.block_size);
    }
    m.payload = std::make_shared<const BlockPayload>(std::move(payload));
  }
  return m;
}

void Scheduler::EmitStored(const Request& req, std::size_t first, std::size_t end,
                           std::vector<kv::KvEvent>* events) const {
  if (first >= end) return;
  const std::size_t bs = config_.block_size;
  kv::BlockStored ev = NewBlockStored(
      config_.block_size, "GPU",
      first > 0 ? std::optional<kv::EngineHash>(req.hashes[first - 1]) : std::nullopt,
      req.spec.lora_name);
  ev.block_hashes.assign(req.hashes.begin() + first, req.hashes.begin() + end);
  ev.token_ids.assign(req.tokens.begin() + first * bs, req.tokens.begin() + end * bs);
  // vLLM ≥ PR #33304 sends every block's extra keys; a plain request's events leave them out
  // (the encoder writes vLLM's [None] * n), so simulations of plain traffic pay nothing.
  if (!req.extra_key_inputs().empty()) {
    ev.extra_keys.emplace();
    ev.extra_keys->reserve(end - first);
    for (std::size_t i = first; i < end; ++i) {
      ev.extra_keys->push_back(req.BlockExtraKeys(i, config_.block_size));
    }
  }
  events->push_back(std::move(ev));
}

void Scheduler::ScheduleWaiting(Nanos now, std::uint32_t* budget, std::vector<Scheduled>* out,
                                std::vector<kv::KvEvent>* events,
                                std::array<double, kNumTiers>* load_bytes) {
  const std::uint32_t bs = config_.block_size;
  SharedKvStore* store = config_.shared.store.get();
  while (!waiting_.empty() && *budget > 0 && running_.size() < config_.max_num_seqs) {
    Request* req = waiting_.front();
    // Prefix hit: consecutive full blocks held by GPU, CPU or disk, then the shared store's
    // run from the first block no local tier holds. vLLM always recomputes at least the last
    // token (its logits are needed), so the hit stops one token short of the end.
    struct Hit {
      std::optional<BlockId> gpu;
      const BlockMeta* local = nullptr;  // CPU or disk tier entry
      Tier tier = Tier::kGpu;
    };
    std::vector<Hit> hits;
    if (config_.enable_prefix_caching) {
      const std::size_t max_blocks =
          std::min<std::size_t>(req->keys.size(), (req->num_tokens() - 1) / bs);
      for (std::size_t i = 0; i < max_blocks; ++i) {
        if (auto id = pool_.Lookup(req->keys[i])) {
          hits.push_back({.gpu = id});
        } else if (const BlockMeta* m = cpu_tier_.Find(req->keys[i])) {
          hits.push_back({.local = m, .tier = Tier::kCpu});
        } else if (const BlockMeta* d = disk_tier_.Find(req->keys[i])) {
          hits.push_back({.local = d, .tier = Tier::kDisk});
        } else {
          break;
        }
      }
      if (store != nullptr && hits.size() < max_blocks) {
        const std::size_t from = hits.size();
        const std::size_t n = store->Match(
            std::span<const kv::EngineHash>(req->hashes).subspan(from, max_blocks - from), now);
        for (std::size_t i = 0; i < n; ++i) hits.push_back({.tier = Tier::kShared});
      }
    }
    const std::uint64_t hit_tokens = hits.size() * std::uint64_t{bs};
    std::int64_t gpu_hits_free = 0;
    std::int64_t lower_hits = 0;
    std::array<std::uint64_t, kNumTiers> tier_hits{};
    for (const Hit& h : hits) {
      if (h.gpu) gpu_hits_free += pool_.ref_count(*h.gpu) == 0 ? 1 : 0;
      if (!h.gpu) ++lower_hits;
      ++tier_hits[static_cast<int>(h.tier)];
    }
    std::uint64_t num_new = req->num_tokens() - hit_tokens;
    // A decode leg allocates its whole prompt at once (it arrives whole) and computes nothing.
    const bool remote = req->remote_pending;
    // An async load takes only the GPU blocks its hit fills, and computes nothing yet.
    const bool async_load =
        config_.async_tier_loads && !remote && !req->tier_loaded && lower_hits > 0;
    if (async_load) {
      num_new = 0;
    } else if (!remote) {
      if (!config_.enable_chunked_prefill && num_new > *budget) break;
      num_new = std::min<std::uint64_t>(num_new, *budget);
    }
    const std::uint64_t total_blocks = (hit_tokens + num_new + bs - 1) / bs;
    const auto new_blocks =
        static_cast<std::int64_t>(total_blocks) - static_cast<std::int64_t>(hits.size());
    // Touching free GPU hits removes them from the free queue, so they do not count as free.
    if (lower_hits + new_blocks > pool_.num_free() - gpu_hits_free) break;

    // Commit. The store's blocks are read now: the lease that kept them has done its job.
    ReleaseStoreLease(req, now);
    if (!req->first_commit) req->first_commit = now;
    // Lower-tier metas are copied now: the allocation below may evict them (a
    // shared block's meta is rebuilt from the request: the store keeps no tokens for us).
    std::vector<BlockMeta> loaded;
    for (std::size_t i = 0; i < hits.size(); ++i) {
      const Hit& h = hits[i];
      if (h.gpu) pool_.Touch(*h.gpu);
      if (h.local) loaded.push_back(*h.local);
      if (h.tier == Tier::kShared) loaded.push_back(MetaFor(*req, i));
    }
    std::vector<BlockId>& fresh = fresh_;
    fresh.clear();
    pool_.Allocate(lower_hits + new_blocks, events, &fresh);
    std::size_t next_fresh = 0;
    std::size_t next_loaded = 0;
    // Loaded blocks are announced on GPU again, one BlockStored per consecutive run.
    std::size_t run_start = 0;
    for (std::size_t i = 0; i < hits.size(); ++i) {
      if (hits[i].gpu) {
        EmitStored(*req, run_start, i, events);
        run_start = i + 1;
        req->blocks.push_back(*hits[i].gpu);
        continue;
      }
      const BlockId id = fresh[next_fresh++];
      BlockMeta& meta = loaded[next_loaded++];
      if (hits[i].tier == Tier::kCpu) cpu_tier_.Touch(meta.key);
      if (hits[i].tier == Tier::kDisk) disk_tier_.Touch(meta.key);
      pool_.Cache(id, std::move(meta));
      req->blocks.push_back(id);
    }
    EmitStored(*req, run_start, hits.size(), events);
    req->blocks.insert(req->blocks.end(), fresh.begin() + next_fresh, fresh.end());
    const double block_bytes = static_cast<double>(bs) * step_time_.KvBytesPerTokenTransfer();
    std::array<double, kNumTiers> tier_bytes{};
    for (int t = 1; t < kNumTiers; ++t) {
      tier_bytes[t] = static_cast<double>(tier_hits[t]) * block_bytes;
      if (!async_load) (*load_bytes)[t] += tier_bytes[t];
      stats_.tier_load_bytes[t] += tier_bytes[t];
    }
    // A request back from an async load was counted when its load began: its prefix is the
    // same hit, now on GPU.
    if (!req->tier_loaded) {
      for (int t = 0; t < kNumTiers; ++t) stats_.tier_hit_tokens[t] += tier_hits[t] * bs;
      stats_.prefix_cache_queries += req->num_tokens();
      stats_.prefix_cache_hits += hit_tokens;
      stats_.cpu_cache_hits += tier_hits[static_cast<int>(Tier::kCpu)] * std::uint64_t{bs};
    }
    req->tier_loaded = false;
    req->num_computed = hit_tokens;
    req->num_cached_blocks = static_cast<std::uint32_t>(hits.size());
    if (remote) {
      waiting_.pop_front();
      StartRemoteLoad(req, static_cast<std::uint32_t>(hits.size()), now);
      continue;
    }
    if (async_load) {
      if (!req->cached_tokens) req->cached_tokens = static_cast<std::uint32_t>(hit_tokens);
      waiting_.pop_front();
      StartTierLoad(req, tier_bytes, now);
      continue;
    }
    if (!req->cached_tokens) req->cached_tokens = static_cast<std::uint32_t>(hit_tokens);
    req->running = true;
    waiting_.pop_front();
    running_.push_back(req);
    out->push_back({req, static_cast<std::uint32_t>(num_new), hit_tokens});
    *budget -= static_cast<std::uint32_t>(num_new);
  }
}

double Scheduler::TierLoadSeconds(int tier, double bytes) const {
  // A tier with nothing to load costs nothing, not even its latency. The host tier keeps its
  // historic form (bandwidth only) so results without the new tiers stay digit-identical.
  if (bytes <= 0) return 0;
  switch (static_cast<Tier>(tier)) {
    case Tier::kCpu:
      return bytes / config_.cpu_to_gpu_bandwidth_bytes_per_s;
    case Tier::kDisk:
      return config_.disk.latency_s + bytes / config_.disk.read_bytes_per_s;
    case Tier::kShared:
      return config_.shared.latency_s + bytes / config_.shared.read_bytes_per_s;
    default:
      return 0;
  }
}

double Scheduler::LoadSeconds(const std::array<double, kNumTiers>& load_bytes) const {
  // Each tier's copy runs on its own path (host DMA over PCIe, the NVMe drive, the NIC), so
  // they proceed in parallel and the step waits for the slowest.
  double s = 0;
  for (int t = 1; t < kNumTiers; ++t) s = std::max(s, TierLoadSeconds(t, load_bytes[t]));
  return s;
}

void Scheduler::CacheFullBlocks(Request* req, std::vector<kv::KvEvent>* events) {
  if (!config_.enable_prefix_caching) return;
  const std::size_t full =
      std::min<std::size_t>(req->num_computed / config_.block_size, req->keys.size());
  std::size_t run_start = req->num_cached_blocks;
  const bool write_through = config_.shared.store != nullptr;
  for (std::size_t i = req->num_cached_blocks; i < full; ++i) {
    BlockMeta meta = MetaFor(*req, i);
    if (write_through) shared_puts_.push_back(meta);  // the store dedups what it has
    if (!pool_.Cache(req->blocks[i], std::move(meta))) {
      // Another request cached this block first: this copy stays private, and the event
      // for the blocks after it names it as parent (the chain is the same).
      EmitStored(*req, run_start, i, events);
      run_start = i + 1;
    }
  }
  EmitStored(*req, run_start, full, events);
  req->num_cached_blocks =
      static_cast<std::uint32_t>(std::max<std::size_t>(full, req->num_cached_blocks));
}

void Scheduler::Step(Nanos now, StepResult* out) {
  StepResult& result = *out;
  result.Clear();
  std::vector<kv::KvEvent>& events = result.kv_events;
  if (pending_clear_) {
    // In place: moving a temporary variant in here trips GCC 12's maybe-uninitialized.
    events.emplace_back(std::in_place_type<kv::AllBlocksCleared>);
    pending_clear_ = false;
  }
  std::swap(result.finished_without_token, aborted_);  // both were empty / cleared

  last_step_ = now;
  ExpirePins(now, out);
  TakeArrivedKv(now, out);
  TakeLoadedTiers(now);
  disk_tier_.SetNow(now);

  std::uint32_t budget = config_.max_num_batched_tokens;
  std::vector<Scheduled>& scheduled = scheduled_;
  scheduled.clear();
  std::array<double, kNumTiers> load_bytes{};
  const bool preempted = ScheduleRunning(&budget, &scheduled, &events);
  if (!preempted) {
    ScheduleLoaded(&budget, &scheduled);
    ScheduleWaiting(now, &budget, &scheduled, &events, &load_bytes);
  }
  // After scheduling: a request scheduled in the step it arrived needs no lease.
  LeaseArrivals(now);
  RenewStoreLeases(now);
  if (scheduled.empty()) return;

  std::vector<SeqWork>& work = work_;
  work.clear();
  for (const Scheduled& s : scheduled) work.push_back({s.num_new, s.context});
  result.duration = step_time_.StepTime(work) + FromSeconds(LoadSeconds(load_bytes));

  const auto palette = std::span<const TokenId>(config_.output_vocabulary);
  std::vector<Request*>& finished = finished_;
  finished.clear();
  result.tokens.reserve(scheduled.size());
  for (const Scheduled& s : scheduled) {
    Request* req = s.req;
    if (s.context < req->num_prompt_tokens) {
      result.num_prefill_tokens += s.num_new;
    } else {
      result.num_decode_tokens += s.num_new;
    }
    req->num_computed += s.num_new;
    CacheFullBlocks(req, &events);
    if (req->num_computed < req->num_tokens()) continue;  // a prefill chunk: no token yet
    TokenEvent& tok = result.tokens.emplace_back();
    tok.request_id = req->spec.id;
    tok.token = req->plan.Token(req->num_output, palette);
    tok.is_first = req->num_output == 0;
    if (tok.is_first) {
      tok.cached_tokens = req->cached_tokens.value_or(0);
      tok.ttft_parts = {.first_commit = req->first_commit.value_or(Nanos{0}),
                        .tier_path_queue_s = req->tier_path_queue_s,
                        .tier_transfer_s = req->tier_transfer_s};
      stats_.prompt_tokens += req->num_prompt_tokens;
    }
    req->tokens.push_back(tok.token);
    ++req->num_output;
    ++stats_.generation_tokens;
    hasher_.Extend(req);
    if (req->num_output >= req->plan.length()) {
      tok.finished = req->plan.reason();
      if (req->spec.remote_decode) tok.pinned_block_ids.assign(req->blocks.begin(), req->blocks.end());
      finished.push_back(req);
    }
  }
  for (Request* req : finished) {
    if (req->spec.remote_decode) {
      Pin(req, now + result.duration);
    } else {
      FreeBlocks(req);
    }
    running_.erase(std::find(running_.begin(), running_.end(), req));
    const std::string id = req->spec.id;  // the key must outlive the node it names
    requests_.erase(id);
  }
  if (!shared_puts_.empty()) {
    config_.shared.store->Put(shared_puts_, now);
    shared_puts_.clear();
  }
}

EngineStats Scheduler::Stats() const {
  EngineStats s = stats_;
  s.num_running = static_cast<std::uint32_t>(running_.size());
  // vLLM counts requests waiting for their KV (WAITING_FOR_REMOTE_KVS) as waiting.
  s.num_waiting = static_cast<std::uint32_t>(waiting_.size() + tier_loading_.size());
  s.kv_cache_usage =
      pool_.num_blocks() == 0 ? 0.0 : static_cast<double>(pool_.num_used()) / pool_.num_blocks();
  s.num_pinned_blocks = num_pinned_blocks_;
  s.num_pinned_requests = static_cast<std::uint32_t>(pinned_.size());
  s.num_loading = static_cast<std::uint32_t>(loading_.size());
  s.tier_blocks[static_cast<int>(Tier::kGpu)] = pool_.num_cached();
  s.tier_blocks[static_cast<int>(Tier::kCpu)] = cpu_tier_.size();
  s.tier_blocks[static_cast<int>(Tier::kDisk)] = disk_tier_.size();
  s.tier_evictions[static_cast<int>(Tier::kGpu)] = pool_.num_evicted();
  s.tier_evictions[static_cast<int>(Tier::kCpu)] = cpu_tier_.counters().evicted;
  s.tier_evictions[static_cast<int>(Tier::kDisk)] = disk_tier_.counters().evicted;
  s.disk_dropped_writes = disk_tier_.counters().dropped_writes;
  return s;
}

bool Scheduler::ResetPrefixCache() {
  // vLLM refuses while blocks are in use (a running request's blocks cannot be forgotten).
  if (pool_.num_used() > 0) return false;
  pool_.ClearCache();
  cpu_tier_.Clear();
  disk_tier_.Clear();
  pending_clear_ = true;
  return true;
}

std::vector<kv::EngineHash> Scheduler::CachedBlockHashes(kv::Tier tier) const {
  switch (tier) {
    case kv::Tier::kGpu:
      return pool_.CachedHashes();
    case kv::Tier::kCpu:
      return cpu_tier_.Hashes();
    case kv::Tier::kDisk:
      return disk_tier_.Hashes();
    default:
      return {};
  }
}

}  // namespace kvroute::engine

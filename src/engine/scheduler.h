// Scheduler: vLLM V1's continuous-batching loop over the paged KV cache — the body of Engine.
//
// Each Step:
//   1. running requests, oldest first: the next prefill chunk or one decode token each,
//      within the token budget (max_num_batched_tokens). A request that needs a block when
//      none is free preempts the newest running request (recompute: its blocks are freed and
//      stay cached; it goes back to the front of the waiting queue), possibly itself.
//   2. if nobody was preempted: waiting requests FCFS while max_num_seqs, the budget and free
//      blocks allow. A newly scheduled request first takes its prefix hit (GPU blocks touched,
//      CPU-, disk- and shared-tier blocks loaded back, capped at prompt − 1 tokens as in vLLM).
//   3. the step's duration from the StepTimeModel, plus the slowest tier's load time.
//   4. KV becomes computed; newly full blocks are cached (one BlockStored per request);
//      requests whose whole sequence is computed sample one token; finished ones free their
//      blocks tail first (a P/D prefill leg pins them instead).
//
// P/D (scheduler_pd.cc). Before 1: pins past their deadline are freed, and decode legs whose
// remote KV arrived (SharedLink) get it cached (BlockStored, as if computed here) and queue
// in loaded_, scheduled before the waiting queue for their last prompt token. In 2, a decode
// leg takes its local prefix hit, allocates blocks for its whole prompt and starts its
// transfer instead of computing: it leaves the waiting queue, takes no token budget and no
// max_num_seqs slot while its KV is in flight (vLLM's WAITING_FOR_REMOTE_KVS).
//
// Async tier loads (EngineConfig::async_tier_loads, scheduler_tiers.cc): in 2, a request with
// a lower-tier hit takes its GPU blocks for the hit and leaves the waiting queue, taking no
// budget or slot until its load is done; before 1, finished loads return to the front of the
// waiting queue, where the prefix is now a GPU hit.
//
// Ownership: owns requests, the block pool and the local tiers (CPU, disk); shares the
// store (EngineConfig::shared). Thread safety: none.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/block_pool.h"
#include "engine/lru_tier.h"
#include "engine/engine.h"
#include "engine/kv_transfer.h"
#include "engine/request.h"
#include "engine/step_time.h"

namespace kvroute::engine {

class Scheduler {
 public:
  // `config` must be resolved: max_model_len, block size and output_vocabulary set;
  // `num_gpu_blocks` the GPU capacity.
  Scheduler(const Profile& profile, const EngineConfig& config, std::int64_t num_gpu_blocks);

  std::optional<std::string> Add(RequestSpec spec);
  void Abort(const std::string& request_id);
  bool HasWork() const;
  // Fills `out` (cleared first, capacity kept).
  void Step(Nanos now, StepResult* out);
  EngineStats Stats() const;
  bool ResetPrefixCache();
  std::vector<kv::EngineHash> CachedBlockHashes(kv::Tier tier) const;
  std::optional<PinnedKv> FindPinned(const std::string& request_id) const;
  bool ReleasePinned(const std::string& request_id);
  std::optional<Nanos> NextTimedEvent() const;

  const BlockPool& pool() const { return pool_; }
  const StepTimeModel& step_time() const { return step_time_; }

 private:
  struct Scheduled {
    Request* req;
    std::uint32_t num_new;
    std::uint64_t context;  // tokens computed before this step
  };

  bool ScheduleRunning(std::uint32_t* budget, std::vector<Scheduled>* out,
                       std::vector<kv::KvEvent>* events);
  // `load_bytes`: bytes loaded this step into GPU from each lower tier (indexed by Tier).
  void ScheduleWaiting(Nanos now, std::uint32_t* budget, std::vector<Scheduled>* out,
                       std::vector<kv::KvEvent>* events,
                       std::array<double, kNumTiers>* load_bytes);
  // Seconds the step waits for this step's lower-tier loads (README "KV tiers").
  double LoadSeconds(const std::array<double, kNumTiers>& load_bytes) const;
  // Seconds one tier's path takes to move `bytes` into GPU memory (0 for nothing).
  double TierLoadSeconds(int tier, double bytes) const;
  // Async lower-tier loads (scheduler_tiers.cc): queue one on the tiers' paths, and move
  // those finished by `now` back to the front of the waiting queue.
  void StartTierLoad(Request* req, const std::array<double, kNumTiers>& bytes, Nanos now);
  void TakeLoadedTiers(Nanos now);
  // P/D (scheduler_pd.cc).
  void ExpirePins(Nanos now, StepResult* out);
  void TakeArrivedKv(Nanos now, StepResult* out);
  void ScheduleLoaded(std::uint32_t* budget, std::vector<Scheduled>* out);
  // A decode leg whose hit and blocks are committed: starts pulling the rest.
  void StartRemoteLoad(Request* req, std::uint32_t local_hit_blocks, Nanos now);
  void Pin(Request* req, Nanos finished_at);
  // Shared-store leases (scheduler_tiers.cc): a request leases the store's run of its prefix
  // at Add when it carries `arrived_at`, else at the end of the next
  // step unless that step scheduled it; a lease ends when its request is scheduled or dropped.
  // A waiting request's lease older than shared.lease_renew_every is renewed each step.
  void LeaseArrivals(Nanos now);
  void RenewStoreLeases(Nanos now);
  void LeaseStoreRun(Request* req, Nanos now);
  void ReleaseStoreLease(Request* req, Nanos now);
  // Removes a not-running request from waiting_, loading_ or loaded_ (freeing its blocks).
  void DropNotRunning(Request* req);
  std::int64_t BlocksNeeded(const Request& req, std::uint64_t num_new) const;
  void Preempt(Request* req);
  void FreeBlocks(Request* req);
  void CacheFullBlocks(Request* req, std::vector<kv::KvEvent>* events);
  BlockMeta MetaFor(const Request& req, std::size_t block_index) const;
  // BlockStored "GPU" for blocks [first, end) of `req` (nothing when empty).
  void EmitStored(const Request& req, std::size_t first, std::size_t end,
                  std::vector<kv::KvEvent>* events) const;

  Profile profile_;
  EngineConfig config_;
  StepTimeModel step_time_;
  BlockHasher hasher_;
  LruTier disk_tier_;  // before cpu_tier_: the host tier spills into it
  LruTier cpu_tier_;
  BlockPool pool_;
  bool lower_tiers_ = false;           // any tier below GPU: metas carry their payload
  std::vector<BlockMeta> shared_puts_;  // blocks cached this step, offered to the store

  std::unordered_map<std::string, std::unique_ptr<Request>> requests_;
  std::deque<Request*> waiting_;
  std::vector<Request*> running_;  // admission order: back() is the newest
  std::uint64_t next_arrival_ = 0;
  std::vector<std::string> aborted_;  // reported by the next Step
  // Scratch of Step, kept between steps so a step allocates nothing it can reuse.
  std::vector<Scheduled> scheduled_;
  std::vector<SeqWork> work_;
  std::vector<Request*> finished_;
  std::vector<BlockId> fresh_;
  std::vector<BlockId> reversed_;
  bool pending_clear_ = false;  // AllBlocksCleared owed to the next Step
  std::vector<std::string> to_lease_;  // ids added since the last step (store leases)
  Nanos last_step_{0};                 // the latest Step's `now` (Abort has no clock)
  EngineStats stats_;

  // P/D prefill side: finished remote_decode requests' blocks, held for their decoder.
  struct Pinned {
    std::vector<BlockId> blocks;
    std::uint32_t num_prompt_tokens = 0;
    Nanos deadline{0};
  };
  std::unordered_map<std::string, Pinned> pinned_;
  std::int64_t num_pinned_blocks_ = 0;
  // P/D decode side: the inbound link, legs whose KV is in flight (by transfer id), and
  // legs whose KV arrived, oldest first.
  SharedLink link_;
  std::uint64_t next_transfer_id_ = 1;
  std::unordered_map<std::uint64_t, Request*> loading_;
  std::deque<Request*> loaded_;
  // Async lower-tier loads: requests whose prefix is being loaded, and when each tier's path
  // is free again.
  std::vector<Request*> tier_loading_;
  std::array<Nanos, kNumTiers> tier_path_free_at_{};
};

}  // namespace kvroute::engine

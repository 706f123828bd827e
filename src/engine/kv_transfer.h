// KV transfer model of disaggregated prefill/decode: how many bytes a decode engine pulls
// from a prefill engine for a run of KV blocks, and how long that takes over a link shared by
// concurrent transfers. The bytes are never sent (kvroute sim moves only the control
// messages); this is the data path, modelled.
//
// Bytes. Each decode rank must end up with the KV its attention heads read:
//   GQA: a rank holds max(1, kv_heads / TP_decode) heads of 2 (K, V) × layers × head_dim
//        elements per token, so the decode side pulls 2 × L × head_dim × dtype ×
//        max(kv_heads, TP_decode) bytes per token (heads replicated when TP > kv_heads).
//   MLA: the latent (kv_lora_rank + qk_rope_head_dim per layer) cannot be split by head, so
//        every decode rank holds a full copy and pulls it: TP_decode × L × latent × dtype.
// Heterogeneous TP (prefill TP ≠ decode TP, as vLLM's NixlConnector supports) changes which
// prefill rank a decode rank reads from, not the bytes above: those depend on the decode side.
//
// Time. The ranks move their shares in parallel, one NIC ("lane") each; a transfer uses
// min(TP_prefill, TP_decode) lanes (the narrower side is the bottleneck: a prefill NIC that
// serves several decode ranks carries all their bytes). So one transfer alone takes
//   latency + bytes / (lane_bandwidth × min(TP_prefill, TP_decode)).
// Concurrent transfers into one decode engine share its NICs (TP_decode lanes): SharedLink
// splits that capacity max-min fairly among active transfers, each capped at its own lanes.
//
// Thread safety: the functions are pure; a SharedLink belongs to one thread (the engine's).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "common/types.h"
#include "engine/profile.h"

namespace kvroute::engine {

// KV bytes one token moves from a prefill engine to a decode engine of `decode_tp` ranks
// (all ranks together). The prefill TP does not change it (see above).
double KvTransferBytesPerToken(const ModelSpec& model, std::uint32_t decode_tp);

// Parallel NIC lanes one transfer between the two engines uses: min(prefill_tp, decode_tp),
// at least 1.
std::uint32_t KvTransferLanes(std::uint32_t prefill_tp, std::uint32_t decode_tp);

// Time of one transfer alone on an idle link.
Nanos KvTransferTime(double bytes, std::uint32_t lanes, const LinkSpec& link);

// Transfers sharing a decode engine's NICs, in simulated time.
//
// Every active transfer drains at a rate set by max-min fairness over `capacity` (lane
// bandwidth × the engine's lanes), never above its own cap (lane bandwidth × its lanes);
// when all bytes are drained it still waits the link latency, then it is finished. Rates
// change only when a transfer starts or drains, so the model is exact between those events.
class SharedLink {
 public:
  struct Finished {
    std::uint64_t id = 0;
    Nanos started{0};
    Nanos finished{0};
    double bytes = 0;
  };

  // `lanes`: the NICs of the engine that owns the link (its TP degree).
  SharedLink(const LinkSpec& link, std::uint32_t lanes);

  // Starts a transfer at `now` (REQUIRES: now >= the time of the last call; id not active).
  // A transfer of 0 bytes finishes after the latency alone.
  void Start(std::uint64_t id, double bytes, std::uint32_t lanes, Nanos now);
  // Forgets a transfer (its request was aborted); no-op when unknown.
  void Cancel(std::uint64_t id);
  // Moves time forward to `now` and returns the transfers finished by then, in finish order.
  std::vector<Finished> AdvanceTo(Nanos now);
  // When the earliest active transfer finishes if nothing else starts; nullopt when idle.
  std::optional<Nanos> NextCompletion() const;
  std::size_t active() const { return flows_.size(); }
  const LinkSpec& link() const { return link_; }

 private:
  struct Flow {
    std::uint64_t id = 0;
    double remaining = 0;  // bytes not yet drained
    double cap = 0;        // bytes/s at most
    double rate = 0;       // bytes/s now
    Nanos started{0};
    double bytes = 0;
    std::optional<Nanos> drained;  // set when every byte is through: waits the latency
  };
  void AssignRates();
  // Seconds until the next draining flow drains at current rates; nullopt if none drains.
  std::optional<double> NextDrainSeconds() const;

  LinkSpec link_;
  double capacity_ = 0;  // bytes/s, all lanes
  Nanos now_{0};
  std::vector<Flow> flows_;
};

}  // namespace kvroute::engine

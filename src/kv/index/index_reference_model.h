// Test-only reference model of KvIndex, written as plainly as possible: per worker a std::map
// from engine hash to (canonical key, reference count) and a map from canonical key to copies
// per tier, plus every key's parent so that nodes can be counted (a node exists iff some
// worker holds it or one of its descendants). The differential test and the randomized edge
// tests (index_edge_*_test.cc) compare the real index with it on the same event streams.
//
// What it models: the event filters (non-main KV cache group, unknown medium, block size
// mismatch, malformed token count: the event is skipped), parent resolution (an unknown
// parent skips the run), hash conflicts (the run stops at the conflicting block), salted
// duplicates (several hashes naming one block), copies per tier saturating at 255 (a further
// store is ignored; a new hash that could not take its reference is not kept), AllBlocksCleared,
// RemoveWorker, staleness, Lookup's per-tier and any-tier prefix depths, IndexStats, and the
// counters listed at `counters` below.
// What it does not model: the layout (slots, inline/spilled entries, the keyed mode without
// an engine map: here a keyed worker's hashes are just hashes that equal keys), snapshots
// (tests compare Dump/Restore copies with the index, not with the model), the other counters
// (batches, blocks_stored/removed, clears, last_event_block_size), and concurrency.
//
// Also here: the synthetic prompts and engine hashes both randomized drivers feed it.
//
// Ownership: holds a reference to the keyer, which must outlive it. Thread safety: none (one
// test thread).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

#include "kv/index/index.h"
#include "kv/index/index_test_util.h"
#include "kv/keys/block_key.h"
#include "kv/kv_event.h"

namespace kvroute::kv::testing {

class ReferenceIndex {
 public:
  // The most copies of one block one worker holds in one tier (the index's saturation).
  static constexpr int kMaxCopies = 255;

  explicit ReferenceIndex(const BlockKeyer& keyer) : keyer_(keyer) {}

  void Apply(WorkerId w, const KvEvent& event) {
    Worker& wk = workers_[w];  // any event makes the worker known, as in the index
    if (std::holds_alternative<AllBlocksCleared>(event)) {
      wk = Worker{};  // forgets hashes, copies and staleness (a clear is a resync point)
      return;
    }
    if (const auto* r = std::get_if<BlockRemoved>(&event)) {
      ApplyRemoved(wk, *r);
    } else {
      ApplyStored(wk, std::get<BlockStored>(event));
    }
  }
  void RemoveWorker(WorkerId w) { workers_.erase(w); }
  void MarkStale(WorkerId w) { workers_[w].stale = true; }
  void ClearStale(WorkerId w) {
    if (auto it = workers_.find(w); it != workers_.end()) it->second.stale = false;
  }

  // Per worker holding keys[0]: how many leading keys it holds in each tier or a faster one
  // (depth[t] counts a key held in any tier <= t), and in any tier.
  std::map<WorkerId, WorkerMatch> Lookup(const std::vector<BlockKey>& keys) const {
    std::map<WorkerId, WorkerMatch> out;
    for (const auto& [w, wk] : workers_) {
      WorkerMatch m;
      m.worker = w;
      m.stale = wk.stale;
      std::array<bool, kNumTiers> alive{true, true, true, true};
      for (BlockKey key : keys) {
        auto it = wk.held.find(key);  // present iff some tier holds a copy
        if (it == wk.held.end()) break;
        bool held_here_or_faster = false;
        for (int t = 0; t < kNumTiers; ++t) {
          held_here_or_faster = held_here_or_faster || it->second[t] > 0;
          alive[t] = alive[t] && held_here_or_faster;
          m.depth[t] += alive[t];
        }
        ++m.any_depth;
      }
      if (m.any_depth > 0) out[w] = m;
    }
    return out;
  }

  // Counting nodes walks every held key up its chain: `nodes` false leaves it 0 (cheaper).
  IndexStats Stats(bool nodes = true) const {
    IndexStats s;
    s.workers = workers_.size();
    std::unordered_set<BlockKey> seen;
    for (const auto& [w, wk] : workers_) {
      s.entries += wk.held.size();
      s.engine_hashes += wk.engine.size();
      if (!nodes) continue;
      for (const auto& [key, copies] : wk.held) {
        std::optional<BlockKey> k = key;
        while (k && seen.insert(*k).second) k = parent_of_.at(*k);
      }
    }
    s.nodes = seen.size();
    return s;
  }

  // Kept: unknown_removals, unknown_parent_runs, unknown_parent_blocks, hash_conflicts,
  // ref_overflow, ignored_group, unknown_medium, block_size_mismatch, malformed. The others
  // stay 0.
  IndexCounters counters;

 private:
  struct Mapping {
    BlockKey key;
    int refs;
  };
  struct Worker {
    std::map<EngineHash, Mapping> engine;
    std::unordered_map<BlockKey, std::array<int, kNumTiers>> held;  // copies per tier
    bool stale = false;
  };

  // Only the main attention group describes a reusable prefix (kv/index/index_apply.cc
  // IsMainGroup).
  static bool MainGroup(const std::optional<std::int64_t>& group_idx,
                        const std::optional<std::string>& kind) {
    if (group_idx.value_or(0) != 0) return false;
    return !kind || *kind == "full_attention" || *kind == "mla_attention" ||
           *kind == "sink_full_attention";
  }

  void ApplyRemoved(Worker& wk, const BlockRemoved& r) {
    if (!MainGroup(r.group_idx, std::nullopt)) {
      ++counters.ignored_group;
      return;
    }
    const std::optional<Tier> tier = TierFromMedium(r.medium.value_or("GPU"));
    if (!tier) {
      ++counters.unknown_medium;
      return;
    }
    const int t = static_cast<int>(*tier);
    for (EngineHash h : r.block_hashes) {
      auto it = wk.engine.find(h);
      auto held = it == wk.engine.end() ? wk.held.end() : wk.held.find(it->second.key);
      if (held == wk.held.end() || held->second[t] == 0) {
        ++counters.unknown_removals;
        continue;
      }
      --held->second[t];
      if (held->second == std::array<int, kNumTiers>{}) wk.held.erase(held);
      if (--it->second.refs == 0) wk.engine.erase(it);
    }
  }

  void ApplyStored(Worker& wk, const BlockStored& s) {
    if (!MainGroup(s.group_idx, s.kv_cache_spec_kind)) {
      ++counters.ignored_group;
      return;
    }
    const std::optional<Tier> tier = TierFromMedium(s.medium.value_or("GPU"));
    if (!tier) {
      ++counters.unknown_medium;
      return;
    }
    if (s.block_size != keyer_.block_size()) {
      ++counters.block_size_mismatch;
      return;
    }
    if (s.token_ids.size() != s.block_hashes.size() * s.block_size) {
      ++counters.malformed;
      return;
    }
    const int t = static_cast<int>(*tier);
    std::optional<BlockKey> parent;
    if (s.parent_block_hash) {
      auto it = wk.engine.find(*s.parent_block_hash);
      if (it == wk.engine.end()) {
        ++counters.unknown_parent_runs;
        counters.unknown_parent_blocks += s.block_hashes.size();
        return;
      }
      parent = it->second.key;
    }
    for (std::size_t i = 0; i < s.block_hashes.size(); ++i) {
      std::span<const TokenId> tokens(s.token_ids.data() + i * s.block_size, s.block_size);
      // Without extra_keys an event names only its adapter: an extra key of every block.
      BlockExtraKeys extra;
      if (s.lora_name && !s.lora_name->empty()) extra.push_back(ExtraKey::Text(*s.lora_name));
      const BlockKey key = keyer_.Next(parent.value_or(keyer_.Root()), tokens, extra);
      auto [it, inserted] = wk.engine.try_emplace(s.block_hashes[i], Mapping{key, 0});
      if (!inserted && it->second.key != key) {
        ++counters.hash_conflicts;
        return;  // later blocks would chain from a wrong parent
      }
      int& copies = wk.held[key][t];
      if (copies == kMaxCopies) {
        ++counters.ref_overflow;
        if (inserted) wk.engine.erase(it);  // a mapping exists only while it holds a copy
      } else {
        ++copies;
        ++it->second.refs;
      }
      parent_of_[key] = parent;
      parent = key;
    }
  }

  const BlockKeyer& keyer_;
  std::map<WorkerId, Worker> workers_;
  std::unordered_map<BlockKey, std::optional<BlockKey>> parent_of_;
};

// A synthetic prompt of the randomized tests: block contents (see kv/index/index_test_util.h), a
// LoRA name, and a salt that changes engine hashes only (what cache_salt does).
struct SyntheticPrompt {
  std::vector<std::uint32_t> contents;
  std::string lora;
  int salt = 0;
};

// Whether worker w publishes kvroute's own keys as engine hashes (an engine hashing blocks as
// kvroute does) for a prompt with this salt: worker 6 always, worker 5 for unsalted prompts
// (a salted one switches it to an engine map until its next clear).
inline bool PublishesKeys(WorkerId w, int salt) { return w == 6 || (w == 5 && salt == 0); }

// The engine's own hash of block i of p on worker w: kvroute's key when PublishesKeys, else
// a hash of the whole prefix, the LoRA, the salt and (on even workers) a per-worker seed, like
// vLLM without a fixed PYTHONHASHSEED, never equal to kvroute's keys in practice.
inline EngineHash SyntheticEngineHash(const BlockKeyer& keyer, WorkerId w, const SyntheticPrompt& p,
                                      std::size_t i) {
  if (PublishesKeys(w, p.salt)) {
    const std::vector<std::uint32_t> prefix(p.contents.begin(), p.contents.begin() + i + 1);
    return PromptKeys(keyer, prefix, p.lora)[i];
  }
  std::uint64_t h = 0x1234567 + (w % 2 == 0 ? w * 0x9E3779B97F4A7C15ULL : 0);
  h ^= std::hash<std::string>{}(p.lora) + static_cast<std::uint64_t>(p.salt) * 0x51ED27;
  for (std::size_t k = 0; k <= i; ++k) h = (h ^ p.contents[k]) * 0x100000001B3ULL + k;
  return h;
}

// IndexStats as a tuple, to compare the index with the model (or with a restored copy).
inline auto StatsTuple(const IndexStats& s) {
  return std::tuple{s.workers, s.nodes, s.entries, s.engine_hashes};
}

// The counters ReferenceIndex keeps, as a tuple, to compare the index with the model.
inline auto ModeledCounters(const IndexCounters& c) {
  return std::tuple{c.unknown_removals, c.unknown_parent_runs, c.unknown_parent_blocks,
                    c.hash_conflicts,   c.ref_overflow,        c.ignored_group,
                    c.unknown_medium,   c.block_size_mismatch, c.malformed};
}

}  // namespace kvroute::kv::testing

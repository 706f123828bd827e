// KvIndexCore write path: applying events (ApplyBatch down to ApplyStored and ApplyRemoved)
// and the reference counting they drive (AddRef, DropRef, holes and kids counts). The
// always_inline halves declared in index_core.h are defined here, in their callers' translation
// unit. Nodes and entries: index_entries.cc; workers: index_workers.cc. The invariants
// maintained here are listed in kv/README.md ("Index"). Why one file of ~520 lines: the
// always_inline reference-count steps must sit in the same translation unit as the event
// loop that calls them (the build has no LTO), and splitting the loop from them costs the
// fast path its inlining.
#include <algorithm>
#include <cassert>

#include "kv/index/index_core.h"

namespace kvroute::kv {
namespace {

// vLLM hybrid models send one event stream per KV cache group; only the main attention
// group describes the prefix a request can reuse.
bool IsMainGroup(const std::optional<std::int64_t>& group_idx,
                 const std::optional<std::string>& kind) {
  if (group_idx.has_value() && *group_idx != 0) return false;
  if (kind.has_value() && *kind != "full_attention" && *kind != "mla_attention" &&
      *kind != "sink_full_attention") {
    return false;
  }
  return true;
}

// An event's tier. The spellings vLLM sends are matched first: TierFromMedium copies and
// case-folds the string (~100 instructions per event, a few per block event), with the same
// result for these.
std::optional<Tier> TierOf(const std::optional<std::string>& medium) {
  if (!medium.has_value() || *medium == "GPU") return Tier::kGpu;
  if (*medium == "CPU") return Tier::kCpu;
  return TierFromMedium(*medium);
}

}  // namespace

KvIndexCore::KvIndexCore(const BlockKeyer& keyer) : keyer_(keyer), plain_root_(keyer_.Root()) {}

void KvIndexCore::ApplyBatch(WorkerId worker, const KvEventBatch& batch) {
  ApplyEvents(worker, batch.events, /*count_batch=*/true);
}

void KvIndexCore::ApplyBatch(WorkerId worker, const KvEventBatch& batch, std::uint64_t seq) {
  ApplyEvents(worker, batch.events, /*count_batch=*/true, seq);
}

std::optional<std::uint64_t> KvIndexCore::AppliedSeq(WorkerId worker) const {
  std::shared_lock lock(mu_);
  const std::uint32_t* slot = FindSlot(worker);
  return slot != nullptr ? workers_[*slot].applied_seq : std::nullopt;
}

void KvIndexCore::ApplyEvent(WorkerId worker, const KvEvent& event) {
  ApplyEvents(worker, std::span<const KvEvent>(&event, 1), /*count_batch=*/false);
}

void KvIndexCore::ApplyEvents(WorkerId worker, std::span<const KvEvent> events, bool count_batch,
                              std::optional<std::uint64_t> seq) {
  // Keying (one XXH3 per block) needs no index state once the parent's key is known, so it
  // runs before the exclusive lock: writers of different workers key in parallel, and only
  // the table mutation is serialized (kv/README.md "Thread-safety contract").
  thread_local PreKeyed pre;
  PreKey(worker, events, &pre);
  std::unique_lock lock(mu_);
  const std::uint32_t slot = SlotFor(worker);
  if (seq) {
    // The index holds this batch already (a replay over a snapshot it was merged from):
    // applying it again would count its blocks' copies twice.
    std::optional<std::uint64_t>& applied = workers_[slot].applied_seq;
    if (applied && *seq <= *applied) {
      ++counters_.duplicate_batches;
      return;
    }
    applied = seq;  // under the same lock as the events below: Dump sees both or neither
  }
  if (count_batch) ++counters_.batches;
  for (std::size_t i = 0; i < events.size(); ++i) {
    ApplyLocked(slot, events[i], i < pre.runs.size() ? &pre.runs[i] : nullptr, pre.keys);
  }
  CompactTouched();
}

// Stored runs that pass the cheap filters get keys chained from an ASSUMED parent key: the
// root, the last key of the previous stored run of this call when it names that block as
// parent (an engine step's runs chain), or what the index maps the parent hash to now (one
// shared lock for the whole call). ApplyStored uses them only if the parent it resolves under
// the exclusive lock has that very key; keys are a function of (parent key, tokens), so they
// are then exactly what it would compute. Otherwise (the parent changed in between, or is
// unknown) it keys under the lock as before.
void KvIndexCore::PreKey(WorkerId worker, std::span<const KvEvent> events, PreKeyed* pre) const {
  pre->runs.assign(events.size(), PreKeyed::Run{});
  pre->keys.clear();
  const std::uint32_t bs = keyer_.block_size();
  auto keyable = [&](const BlockStored& e) {
    return !e.block_hashes.empty() && e.block_size == bs &&
           e.token_ids.size() == e.block_hashes.size() * bs;
  };
  // Pass 1: which parents come from the index (resolved together under one shared lock).
  bool need_index = false;
  const BlockStored* prev = nullptr;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const auto* st = std::get_if<BlockStored>(&events[i]);
    if (st == nullptr || !keyable(*st)) continue;
    if (st->parent_block_hash.has_value() &&
        (prev == nullptr || *st->parent_block_hash != prev->block_hashes.back())) {
      pre->runs[i].state = PreKeyed::kFromIndex;
      need_index = true;
    }
    prev = st;
  }
  if (need_index) {
    std::shared_lock lock(mu_);
    const std::uint32_t* slot = FindSlot(worker);
    for (std::size_t i = 0; i < events.size(); ++i) {
      PreKeyed::Run& run = pre->runs[i];
      if (run.state != PreKeyed::kFromIndex) continue;
      const std::uint32_t node =
          slot == nullptr ? kNoNode
                          : ResolveHash(*slot, *std::get<BlockStored>(events[i]).parent_block_hash);
      run.state = node == kNoNode ? PreKeyed::kNone : PreKeyed::kKeyed;
      if (node != kNoNode) run.parent = nodes_[node].key;
    }
  }
  // Pass 2: key, in order (a run chained to the previous one needs its last key).
  prev = nullptr;
  const PreKeyed::Run* prev_run = nullptr;
  thread_local std::vector<BlockExtraKeys> extra_scratch;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const auto* st = std::get_if<BlockStored>(&events[i]);
    if (st == nullptr || !keyable(*st)) continue;
    PreKeyed::Run& run = pre->runs[i];
    std::span<const BlockExtraKeys> extra;
    if (EventExtraKeys(st->extra_keys, st->lora_name, st->lora_id, st->block_hashes.size(),
                       &extra_scratch, &extra) == EventExtras::kMalformed) {
      run.state = PreKeyed::kNone;  // ApplyStored counts it
      prev = st;
      prev_run = &run;
      continue;
    }
    if (!st->parent_block_hash.has_value()) {
      run.parent = plain_root_;
      run.state = PreKeyed::kKeyed;
    } else if (prev != nullptr && *st->parent_block_hash == prev->block_hashes.back() &&
               prev_run->state == PreKeyed::kKeyed) {
      run.parent = pre->keys[prev_run->offset + prev->block_hashes.size() - 1];
      run.state = PreKeyed::kKeyed;
    }
    prev = st;
    prev_run = &run;
    if (run.state != PreKeyed::kKeyed) continue;
    run.offset = static_cast<std::uint32_t>(pre->keys.size());
    keyer_.AppendKeys(st->token_ids, run.parent, &pre->keys, extra);
  }
}

inline void KvIndexCore::ParentGainsKid(std::uint32_t slot, std::uint32_t node, int tier,
                                        EntryRef parent_entry) {
  using HL = HolderList;
  const std::uint32_t parent = nodes_[node].parent;
  if (parent == kNoNode) return;
  const EntryRef pe = parent_entry ? parent_entry : GetOrCreateEntry(parent, slot);
  HolderList& ph = *pe.list();
  const std::uint64_t pw = ph.word();
  const std::uint64_t kids = pw & HL::KidsMask(tier);
  if ((pw & HL::kTagBit) == 0 && kids != HL::KidsMask(tier)) {
    // Inline and the count stays below 8: one add to the packed field.
    ph.SetInlineWord(pw + HL::KidsOne(tier));
    if (kids == 0 && (pw & HL::RefBit(tier)) == 0) SetHole(slot, parent, tier, true);
    return;
  }
  ParentGainsKidSlow(slot, parent, tier, pe);
}

inline void KvIndexCore::ParentLosesKid(std::uint32_t slot, std::uint32_t node, int tier) {
  using HL = HolderList;
  const std::uint32_t parent = nodes_[node].parent;
  if (parent == kNoNode) return;
  HolderList& ph = nodes_[parent].holders;
  std::uint64_t pw = ph.word();
  if ((pw & HL::kTagBit) == 0) {
    // Inline: it is this worker's entry and its count is >= 1 (OnHeld counted `node` in it,
    // and the counts are exact), and a decrement always fits.
    assert(pw != 0 && ph.inline_slot() == slot && (pw & HL::KidsMask(tier)) != 0);
    const bool last = (pw & HL::KidsMask(tier)) == HL::KidsOne(tier);
    pw -= HL::KidsOne(tier);
    if (last && (pw & HL::RefBit(tier)) == 0) SetHole(slot, parent, tier, false);
    // An emptied placeholder goes; the parent node stays (`node` is its child).
    if ((pw & (HL::kRefBits | HL::kKidsBits)) == 0) pw = 0;
    ph.SetInlineWord(pw);
    return;
  }
  ParentLosesKidSlow(slot, parent, tier);
}

// Inline (its ref is 1, the only count the packed form holds): one load and one store, and
// the release below reads the same word (the parent's edits touch another list).
inline void KvIndexCore::DropInlineRef(std::uint32_t slot, std::uint32_t node, HolderList& h,
                                       std::uint64_t w, int tier) {
  using HL = HolderList;
  assert((w & HL::kTagBit) == 0 && (w & HL::RefBit(tier)) != 0);
  w &= ~HL::RefBit(tier);
  h.SetInlineWord(w);
  if ((w & HL::kRefBits) == 0) {
    --num_entries_;
    --workers_[slot].held;
  }
  if ((w & HL::KidsMask(tier)) != 0) SetHole(slot, node, tier, true);
  ParentLosesKid(slot, node, tier);
  if ((w & (HL::kRefBits | HL::kKidsBits)) != 0) return;
  h.InlineErase();
  MaybeDeleteNode(node);
}

void KvIndexCore::ApplyLocked(std::uint32_t slot, const KvEvent& event, const PreKeyed::Run* run,
                              std::span<const BlockKey> pre_keys) {
  if (const auto* stored = std::get_if<BlockStored>(&event)) {
    ApplyStored(slot, *stored, run, pre_keys);
  } else if (const auto* removed = std::get_if<BlockRemoved>(&event)) {
    ApplyRemoved(slot, *removed);
  } else {
    ++counters_.clears;
    PurgeWorker(slot);
    workers_[slot].stale = false;  // a clear is a resync point
  }
}

void KvIndexCore::ApplyStored(std::uint32_t slot, const BlockStored& e, const PreKeyed::Run* run,
                              std::span<const BlockKey> pre_keys) {
  if (!IsMainGroup(e.group_idx, e.kv_cache_spec_kind)) {
    ++counters_.ignored_group;
    return;
  }
  std::optional<Tier> tier = TierOf(e.medium);
  if (!tier) {
    ++counters_.unknown_medium;
    return;
  }
  counters_.last_event_block_size = e.block_size;
  if (e.block_size != keyer_.block_size()) {
    ++counters_.block_size_mismatch;
    return;
  }
  const std::size_t n = e.block_hashes.size();
  if (e.token_ids.size() != n * e.block_size) {
    ++counters_.malformed;
    return;
  }
  // The blocks' extra keys, from what the event says (kv/keys/extra_keys.h).
  std::span<const BlockExtraKeys> extra;
  const EventExtras extras =
      EventExtraKeys(e.extra_keys, e.lora_name, e.lora_id, n, &scratch_extra_, &extra);
  if (extras == EventExtras::kMalformed) {
    ++counters_.extra_keys_mismatch;
    return;
  }
  if (extras == EventExtras::kLoraOnly && !e.parent_block_hash.has_value() &&
      workers_[slot].salted_traffic) {
    // Block 0 of a worker that serves salted requests, from an event that cannot say whether
    // this one was salted: crediting it to unsalted requests could give one tenant's cache to
    // another, so it stays out (and so do its descendants: their parent is unknown).
    ++counters_.unattributed_runs;
    counters_.unattributed_blocks += n;
    return;
  }
  std::uint32_t parent_node = kNoNode;
  BlockKey parent_key;
  if (e.parent_block_hash.has_value()) {
    parent_node = ResolveHash(slot, *e.parent_block_hash);
    if (parent_node == kNoNode) {
      // Without the parent's key the run cannot be keyed; guessing would index wrong keys.
      ++counters_.unknown_parent_runs;
      counters_.unknown_parent_blocks += n;
      return;
    }
    parent_key = nodes_[parent_node].key;
  } else {
    parent_key = plain_root_;
  }
  std::span<const BlockKey> keys;
  if (run != nullptr && run->state == PreKeyed::kKeyed && run->parent == parent_key) {
    keys = pre_keys.subspan(run->offset, n);  // keyed outside the lock, from this very parent
  } else {
    scratch_keys_.clear();
    keyer_.AppendKeys(e.token_ids, parent_key, &scratch_keys_, extra);
    keys = scratch_keys_;
  }
  const int t = static_cast<int>(*tier);
  WorkerState& w = workers_[slot];
  EngineMap& engine = w.engine;
  // The previous block's entry: it is the parent entry OnHeld needs next, and saving its
  // search is a measurable share of a store. Valid across iterations: a block's work changes
  // only its own node's and its parent's holder lists.
  EntryRef prev_entry;
  std::uint32_t prev_node = kNoNode;
  // One more reference of `node` in tier t, unless the count is saturated (then false). The
  // previous block's entry is passed on when it is this node's parent's.
  auto add_ref = [&](std::uint32_t node, EntryRef entry) {
    if (entry.ref(t) == kMaxRef) {
      ++counters_.ref_overflow;
      return false;
    }
    const bool hint = prev_entry && node != prev_node && nodes_[node].parent == prev_node;
    AddRef(slot, node, entry, t, hint ? prev_entry : EntryRef());
    ++counters_.blocks_stored;
    return true;
  };
  // A block no worker has an entry for (most stores): its entry is created holding tier t
  // in one store, and AddRef's steps that cannot apply are skipped (no refs or kids before,
  // so no hole to close). The list being empty implies node != prev_node (prev_node holds a
  // ref). False when the slot does not fit the packed form (the general path then runs).
  // The block just stored is the next one's parent.
  auto advance = [&](std::uint32_t node, EntryRef entry) __attribute__((always_inline)) {
    parent_node = node;
    prev_entry = entry;
    prev_node = node;
  };
  auto store_fresh = [&](std::uint32_t node, std::uint32_t lo) __attribute__((always_inline)) {
    HolderList& h = nodes_[node].holders;
    if (!h.empty() || !h.InlineCreateHeld(slot, t, lo)) return false;
    ++num_entries_;
    ++w.held;
    const bool hint = prev_entry && nodes_[node].parent == prev_node;
    ParentGainsKid(slot, node, t, hint ? prev_entry : EntryRef());
    ++counters_.blocks_stored;
    advance(node, EntryRef(&h, slot));
    return true;
  };
  for (std::size_t i = 0; i < n; ++i) {
    const BlockKey key = keys[i];
    const EngineHash hash = e.block_hashes[i];
    if (w.hashes_are_keys && hash != key) MaterializeEngineMap(slot);
    if (w.hashes_are_keys) {
      // The hash names this node and no other (it is its key), and its count is the entry's
      // refs: nothing to map, no conflict possible.
      const std::uint32_t node = GetOrCreateNode(key, parent_node);
      if (store_fresh(node, 0)) continue;
      const EntryRef entry = GetOrCreateEntry(node, slot);
      add_ref(node, entry);
      advance(node, entry);
      continue;
    }
    auto [mapped, inserted] = engine.Insert(hash, LoOf(slot));
    std::uint32_t node;
    if (inserted) {
      node = GetOrCreateNode(key, parent_node);
      if (store_fresh(node, EngineMap::Lo(hash))) {
        EngineMap::SetPrimary(mapped, node);  // the entry has no refs: the hash is primary
        continue;
      }
    } else {
      node = EngineMap::Node(*mapped.value);
      if (nodes_[node].key != key) {
        // The engine reused a hash for different content (or its hash is not a chain hash).
        // Keep the first mapping and stop: later blocks would chain from a wrong parent.
        ++counters_.hash_conflicts;
        return;
      }
    }
    // The entry keeps a ref afterwards (added now, or saturated before), so it never needs
    // erasing here. GetOrCreateNode and GetOrCreateEntry do not touch the worker's engine
    // map, so `mapped` is still valid.
    EntryRef entry = GetOrCreateEntry(node, slot);
    if (inserted) {
      if (entry.any_ref()) {
        // Another of this worker's hashes names this block already (cache_salt): its entry
        // keeps that hash's half, so this one goes to the overflow map.
        mapped = engine.MoveToExtra(hash, mapped, node);
      } else {
        EngineMap::SetPrimary(mapped, node);
        entry.set_hash_lo(EngineMap::Lo(hash));
      }
    }
    // The engine-map count is taken before AddRef, as before the helper existed.
    const bool saturated = entry.ref(t) == kMaxRef;
    if (!saturated && !inserted) engine.AddRef(hash, mapped);
    if (!add_ref(node, entry) && inserted) {
      // A mapping exists only while its count is positive: a new one that could not take
      // its reference goes again (later runs naming it as parent count as unknown parent).
      engine.Erase(hash, mapped);
    }
    advance(node, entry);
  }
}

void KvIndexCore::ApplyRemoved(std::uint32_t slot, const BlockRemoved& e) {
  if (!IsMainGroup(e.group_idx, std::nullopt)) {
    ++counters_.ignored_group;
    return;
  }
  std::optional<Tier> tier = TierOf(e.medium);
  if (!tier) {
    ++counters_.unknown_medium;
    return;
  }
  const int t = static_cast<int>(*tier);
  WorkerState& w = workers_[slot];
  for (EngineHash hash : e.block_hashes) {
    if (w.hashes_are_keys) {
      const std::uint32_t node = ResolveHash(slot, hash);
      const EntryRef entry = node == kNoNode ? EntryRef() : FindEntry(node, slot);
      if (!entry || entry.ref(t) == 0) {
        ++counters_.unknown_removals;
        continue;
      }
      DropRef(slot, node, entry, t);
      ++counters_.blocks_removed;
      continue;
    }
    const EngineMap::Mapping mapped = w.engine.Find(hash, LoOf(slot));
    const std::uint32_t node = mapped ? EngineMap::Node(*mapped.value) : kNoNode;
    if (node != kNoNode) {
      HolderList& h = nodes_[node].holders;
      const std::uint64_t word = h.word();
      if ((word & HolderList::kTagBit) == 0) {
        // The inline entry (the mapping names a node this worker has an entry in).
        if (h.inline_slot() != slot || (word & HolderList::RefBit(t)) == 0) {
          ++counters_.unknown_removals;
          continue;
        }
        w.engine.DropRef(hash, mapped);
        DropInlineRef(slot, node, h, word, t);
        ++counters_.blocks_removed;
        continue;
      }
    }
    const EntryRef entry = mapped ? FindEntry(node, slot) : EntryRef();
    if (!entry || entry.ref(t) == 0) {
      ++counters_.unknown_removals;
      continue;
    }
    w.engine.DropRef(hash, mapped);
    DropRef(slot, node, entry, t);
    ++counters_.blocks_removed;
  }
}

void KvIndexCore::AddRef(std::uint32_t slot, std::uint32_t node, EntryRef entry, int tier,
                         EntryRef parent_entry) {
  using HL = HolderList;
  HolderList& h = *entry.list();
  const std::uint64_t w = h.word();
  if ((w & (HL::kTagBit | HL::RefBit(tier))) == 0) {
    // Inline with ref 0 -> 1 (most stores): the packed word in one load and one store; its
    // lane count is derived from the ref bits, nothing else to update.
    h.SetInlineWord(w | HL::RefBit(tier));
    if ((w & HL::kRefBits) == 0) {
      ++num_entries_;
      ++workers_[slot].held;
    }
    if ((w & HL::KidsMask(tier)) != 0) SetHole(slot, node, tier, false);
    ParentGainsKid(slot, node, tier, parent_entry);
    return;
  }
  AddRefSlow(slot, node, entry, tier, parent_entry);
}

void KvIndexCore::AddRefSlow(std::uint32_t slot, std::uint32_t node, EntryRef entry, int tier,
                             EntryRef parent_entry) {
  const bool was_held = entry.any_ref();
  const std::uint8_t r = entry.ref(tier);
  const std::uint32_t lanes = entry.lanes();
  entry.set_ref(*this, tier, static_cast<std::uint8_t>(r + 1));
  if (r == 0) {
    if (!was_held) {
      ++num_entries_;
      ++workers_[slot].held;
    }
    // A tier faster than every one held adds the lanes between them (cumulative lanes), a
    // first tier also the any-tier lane; a slower one adds none.
    entry.AddLanes(static_cast<int>(entry.lanes()) - static_cast<int>(lanes));
    OnHeld(slot, node, entry, tier, parent_entry);
  }
}

void KvIndexCore::DropRef(std::uint32_t slot, std::uint32_t node, EntryRef entry, int tier) {
  HolderList& h = *entry.list();
  const std::uint64_t w = h.word();
  if ((w & HolderList::kTagBit) == 0) {
    DropInlineRef(slot, node, h, w, tier);
    return;
  }
  DropRefSlow(slot, node, entry, tier);
}

void KvIndexCore::DropRefSlow(std::uint32_t slot, std::uint32_t node, EntryRef entry, int tier) {
  const std::uint8_t r = entry.ref(tier);
  assert(r > 0);
  const std::uint32_t lanes = entry.lanes();
  entry.set_ref(*this, tier, static_cast<std::uint8_t>(r - 1));
  if (r == 1) {
    const bool still_held = entry.any_ref();
    if (!still_held) {
      --num_entries_;
      --workers_[slot].held;
    }
    entry.AddLanes(static_cast<int>(entry.lanes()) - static_cast<int>(lanes));
    OnReleased(slot, node, entry, tier);  // may erase the entry and the node
  }
}

// (slot, tier) now holds `node`: the node stops being a hole, and its parent becomes one if
// the worker does not hold the parent in this tier.
void KvIndexCore::OnHeld(std::uint32_t slot, std::uint32_t node, EntryRef entry, int tier,
                         EntryRef parent_entry) {
  if (entry.kids(tier) > 0) SetHole(slot, node, tier, false);
  ParentGainsKid(slot, node, tier, parent_entry);
}

void KvIndexCore::ParentGainsKidSlow(std::uint32_t slot, std::uint32_t parent, int tier,
                                     EntryRef pe) {
  if (IncKids(parent, slot, pe, tier) && pe.ref(tier) == 0) SetHole(slot, parent, tier, true);
}

// (slot, tier) no longer holds `node`: the reverse of OnHeld.
void KvIndexCore::OnReleased(std::uint32_t slot, std::uint32_t node, EntryRef entry, int tier) {
  if (entry.kids(tier) > 0) SetHole(slot, node, tier, true);
  ParentLosesKid(slot, node, tier);
  if (entry.any_ref() || entry.any_kids()) return;
  entry.Erase(*this);
  MaybeDeleteNode(node);
}

void KvIndexCore::ParentLosesKidSlow(std::uint32_t slot, std::uint32_t parent, int tier) {
  // OnHeld counted `node` in the parent's entry, and the counts are exact.
  EntryRef pe = FindEntry(parent, slot);
  assert(pe && pe.kids(tier) > 0);
  if (DecKids(parent, slot, pe, tier) && pe.ref(tier) == 0) {
    SetHole(slot, parent, tier, false);
  }
  // An emptied placeholder goes; the parent node stays (`node` is its child).
  if (!pe.any_ref() && !pe.any_kids()) pe.Erase(*this);
}

void KvIndexCore::EntryRef::Erase(KvIndexCore& index) {
  if (list_->is_inline()) {
    list_->InlineErase();
  } else {
    list_->erase(list_->HeapEntryOf(slot_), index.pool_);
    index.touched_.push_back(list_);  // it may be left with one entry that fits inline
  }
  list_ = nullptr;
}
}  // namespace kvroute::kv

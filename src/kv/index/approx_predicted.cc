#include "kv/index/approx_predicted.h"

#include <algorithm>

namespace kvroute::kv {
namespace {

// splitmix64's finalizer: block keys in tests are small integers, so they are mixed first.
std::uint64_t Mix(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::uint32_t PairHash(BlockKey key, WorkerId worker) {
  return static_cast<std::uint32_t>(Mix(key ^ (std::uint64_t{worker} * 0x9e3779b97f4a7c15ULL)));
}

// Backward-shift deletion for linear probing: empties slot `i` and moves later members of the
// probe run back so that no lookup meets a hole before its element. `home(slot)` is the slot
// an element hashes to; `empty(slot)` tells a free slot.
template <typename Slot, typename Home, typename Empty>
void EraseSlot(std::vector<Slot>& slots, std::size_t i, Home home, Empty empty) {
  const std::size_t mask = slots.size() - 1;
  for (std::size_t j = (i + 1) & mask; !empty(slots[j]); j = (j + 1) & mask) {
    const std::size_t h = home(slots[j]) & mask;
    // The element at j may move to i unless its home lies cyclically in (i, j].
    const bool stays = i < j ? (h > i && h <= j) : (h > i || h <= j);
    if (stays) continue;
    slots[i] = slots[j];
    i = j;
  }
  slots[i] = Slot{};
}

}  // namespace

PredictedBlocks::PredictedBlocks(PredictedOptions options) : options_(options) {}

PredictedBlocks::WorkerBlocks& PredictedBlocks::Get(WorkerId worker) {
  auto [it, inserted] = workers_.try_emplace(worker);
  if (inserted) it->second.capacity = options_.default_capacity_blocks;
  return it->second;
}

std::uint32_t PredictedBlocks::FindEntry(BlockKey key, WorkerId worker) const {
  if (pairs_.empty()) return kNil;
  const std::uint32_t hash = PairHash(key, worker);
  const std::size_t mask = pairs_.size() - 1;
  for (std::size_t i = hash & mask;; i = (i + 1) & mask) {
    const PairSlot& s = pairs_[i];
    if (s.entry == kNil) return kNil;
    if (s.hash == hash) {
      const Entry& e = entries_[s.entry];
      if (e.key == key && e.worker == worker) return s.entry;
    }
  }
}

std::size_t PredictedBlocks::FindKeySlot(BlockKey key) const {
  const std::size_t mask = keys_.size() - 1;
  for (std::size_t i = Mix(key) & mask;; i = (i + 1) & mask) {
    if (keys_[i].first == kNil || keys_[i].key == key) return i;
  }
}

void PredictedBlocks::GrowPairs() {
  std::vector<PairSlot> old = std::move(pairs_);
  pairs_.assign(old.empty() ? 16 : old.size() * 2, PairSlot{});
  const std::size_t mask = pairs_.size() - 1;
  for (const PairSlot& s : old) {
    if (s.entry == kNil) continue;
    std::size_t i = s.hash & mask;
    while (pairs_[i].entry != kNil) i = (i + 1) & mask;
    pairs_[i] = s;
  }
}

void PredictedBlocks::GrowKeys() {
  std::vector<KeySlot> old = std::move(keys_);
  keys_.assign(old.empty() ? 16 : old.size() * 2, KeySlot{});
  for (const KeySlot& s : old) {
    if (s.first != kNil) keys_[FindKeySlot(s.key)] = s;
  }
}

void PredictedBlocks::InsertPair(std::uint32_t e) {
  if ((pairs_used_ + 1) * 4 > pairs_.size() * 3) GrowPairs();
  const std::uint32_t hash = PairHash(entries_[e].key, entries_[e].worker);
  const std::size_t mask = pairs_.size() - 1;
  std::size_t i = hash & mask;
  while (pairs_[i].entry != kNil) i = (i + 1) & mask;
  pairs_[i] = PairSlot{e, hash};
  ++pairs_used_;
}

void PredictedBlocks::ErasePair(std::uint32_t e) {
  const std::uint32_t hash = PairHash(entries_[e].key, entries_[e].worker);
  const std::size_t mask = pairs_.size() - 1;
  std::size_t i = hash & mask;
  while (pairs_[i].entry != e) i = (i + 1) & mask;  // present: the entry is live
  EraseSlot(
      pairs_, i, [](const PairSlot& s) { return std::size_t{s.hash}; },
      [](const PairSlot& s) { return s.entry == kNil; });
  --pairs_used_;
}

void PredictedBlocks::AddHolder(std::uint32_t e) {
  if ((keys_used_ + 1) * 4 > keys_.size() * 3) GrowKeys();
  KeySlot& s = keys_[FindKeySlot(entries_[e].key)];
  if (s.first == kNil) {
    s = KeySlot{entries_[e].key, e, e};
    ++keys_used_;
    return;
  }
  entries_[s.last].next_holder = e;
  entries_[e].prev_holder = s.last;
  s.last = e;
}

void PredictedBlocks::RemoveHolder(std::uint32_t e) {
  Entry& x = entries_[e];
  const std::size_t i = FindKeySlot(x.key);
  KeySlot& s = keys_[i];
  if (x.prev_holder != kNil) {
    entries_[x.prev_holder].next_holder = x.next_holder;
  } else {
    s.first = x.next_holder;
  }
  if (x.next_holder != kNil) {
    entries_[x.next_holder].prev_holder = x.prev_holder;
  } else {
    s.last = x.prev_holder;
  }
  x.prev_holder = x.next_holder = kNil;
  if (s.first != kNil) return;
  EraseSlot(
      keys_, i, [](const KeySlot& k) { return static_cast<std::size_t>(Mix(k.key)); },
      [](const KeySlot& k) { return k.first == kNil; });
  --keys_used_;
}

void PredictedBlocks::Unlink(WorkerBlocks& w, std::uint32_t e) {
  Entry& x = entries_[e];
  if (x.newer != kNil) {
    entries_[x.newer].older = x.older;
  } else {
    w.newest = x.older;
  }
  if (x.older != kNil) {
    entries_[x.older].newer = x.newer;
  } else {
    w.oldest = x.newer;
  }
  x.newer = x.older = kNil;
}

void PredictedBlocks::PushFront(WorkerBlocks& w, std::uint32_t e) {
  entries_[e].newer = kNil;
  entries_[e].older = w.newest;
  if (w.newest != kNil) {
    entries_[w.newest].newer = e;
  } else {
    w.oldest = e;
  }
  w.newest = e;
}

void PredictedBlocks::MoveToFront(WorkerBlocks& w, std::uint32_t e) {
  if (w.newest == e) return;
  Unlink(w, e);
  PushFront(w, e);
}

void PredictedBlocks::AddEntry(WorkerBlocks& w, WorkerId worker, BlockKey key, Nanos expiry) {
  std::uint32_t e;
  if (free_entries_.empty()) {
    e = static_cast<std::uint32_t>(entries_.size());
    entries_.emplace_back();
  } else {
    e = free_entries_.back();
    free_entries_.pop_back();
  }
  entries_[e] = Entry{.key = key, .expiry = expiry, .worker = worker};
  PushFront(w, e);
  InsertPair(e);
  AddHolder(e);
  ++w.count;
  ++size_;
}

void PredictedBlocks::EvictOldest(WorkerBlocks& w) {
  const std::uint32_t e = w.oldest;
  Unlink(w, e);
  ErasePair(e);
  RemoveHolder(e);
  free_entries_.push_back(e);
  --w.count;
  --size_;
}

void PredictedBlocks::ExpireWorker(WorkerBlocks& w, Nanos now) {
  while (w.oldest != kNil && entries_[w.oldest].expiry <= now) EvictOldest(w);
}

void PredictedBlocks::SetCapacity(WorkerId worker, std::size_t blocks) {
  std::lock_guard lock(mu_);
  WorkerBlocks& w = Get(worker);
  w.capacity = blocks;
  while (w.count > w.capacity) EvictOldest(w);
}

void PredictedBlocks::Record(WorkerId worker, std::span<const BlockKey> keys, Nanos now) {
  std::lock_guard lock(mu_);
  WorkerBlocks& w = Get(worker);
  ExpireWorker(w, now);
  if (w.capacity == 0) return;
  // Only the first `capacity` blocks can be kept; recording more would evict block 0.
  const std::size_t n = std::min(keys.size(), w.capacity);
  const Nanos expiry = now + options_.ttl;
  for (std::size_t i = n; i-- > 0;) {  // tail first: block 0 ends most recent
    if (const std::uint32_t e = FindEntry(keys[i], worker); e != kNil) {
      entries_[e].expiry = expiry;
      MoveToFront(w, e);
      continue;
    }
    AddEntry(w, worker, keys[i], expiry);
    if (w.count > w.capacity) EvictOldest(w);
  }
}

std::vector<PredictedMatch> PredictedBlocks::Lookup(std::span<const BlockKey> keys,
                                                    Nanos now) const {
  std::vector<PredictedMatch> out;
  if (keys.empty()) return out;
  std::lock_guard lock(mu_);
  if (keys_.empty()) return out;
  const KeySlot& s = keys_[FindKeySlot(keys[0])];
  for (std::uint32_t h = s.first; h != kNil; h = entries_[h].next_holder) {
    const WorkerId worker = entries_[h].worker;
    std::uint32_t depth = 0;
    while (depth < keys.size()) {
      const std::uint32_t e = depth == 0 ? h : FindEntry(keys[depth], worker);
      if (e == kNil || entries_[e].expiry <= now) break;
      ++depth;
    }
    if (depth > 0) out.push_back(PredictedMatch{worker, depth});
  }
  return out;
}

void PredictedBlocks::RemoveWorker(WorkerId worker) {
  std::lock_guard lock(mu_);
  auto it = workers_.find(worker);
  if (it == workers_.end()) return;
  while (it->second.oldest != kNil) EvictOldest(it->second);
  workers_.erase(it);
}

void PredictedBlocks::Expire(Nanos now) {
  std::lock_guard lock(mu_);
  for (auto& [worker, w] : workers_) ExpireWorker(w, now);
}

std::size_t PredictedBlocks::size() const {
  std::lock_guard lock(mu_);
  return size_;
}

}  // namespace kvroute::kv

#include "kv/approx_predicted.h"

#include <algorithm>

namespace kvroute::kv {

PredictedBlocks::PredictedBlocks(PredictedOptions options) : options_(options) {}

PredictedBlocks::WorkerBlocks& PredictedBlocks::Get(WorkerId worker) {
  auto [it, inserted] = workers_.try_emplace(worker);
  if (inserted) it->second.capacity = options_.default_capacity_blocks;
  return it->second;
}

void PredictedBlocks::EvictBack(WorkerId worker, WorkerBlocks& w) {
  const BlockKey key = w.lru.back().key;
  w.where.erase(key);
  w.lru.pop_back();
  --size_;
  auto h = holders_.find(key);
  if (h == holders_.end()) return;
  std::erase(h->second, worker);
  if (h->second.empty()) holders_.erase(h);
}

void PredictedBlocks::ExpireWorker(WorkerId worker, WorkerBlocks& w, Nanos now) {
  while (!w.lru.empty() && w.lru.back().expiry <= now) EvictBack(worker, w);
}

void PredictedBlocks::SetCapacity(WorkerId worker, std::size_t blocks) {
  std::lock_guard lock(mu_);
  WorkerBlocks& w = Get(worker);
  w.capacity = blocks;
  while (w.lru.size() > w.capacity) EvictBack(worker, w);
}

void PredictedBlocks::Record(WorkerId worker, std::span<const BlockKey> keys, Nanos now) {
  std::lock_guard lock(mu_);
  WorkerBlocks& w = Get(worker);
  ExpireWorker(worker, w, now);
  if (w.capacity == 0) return;
  // Only the first `capacity` blocks can be kept; recording more would evict block 0.
  const std::size_t n = std::min(keys.size(), w.capacity);
  const Nanos expiry = now + options_.ttl;
  for (std::size_t i = n; i-- > 0;) {  // tail first: block 0 ends most recent
    auto found = w.where.find(keys[i]);
    if (found != w.where.end()) {
      found->second->expiry = expiry;
      w.lru.splice(w.lru.begin(), w.lru, found->second);
      continue;
    }
    w.lru.push_front(Item{keys[i], expiry});
    w.where.emplace(keys[i], w.lru.begin());
    holders_[keys[i]].push_back(worker);
    ++size_;
    if (w.lru.size() > w.capacity) EvictBack(worker, w);
  }
}

std::vector<PredictedMatch> PredictedBlocks::Lookup(std::span<const BlockKey> keys,
                                                    Nanos now) const {
  std::vector<PredictedMatch> out;
  if (keys.empty()) return out;
  std::lock_guard lock(mu_);
  auto h = holders_.find(keys[0]);
  if (h == holders_.end()) return out;
  for (WorkerId worker : h->second) {
    const WorkerBlocks& w = workers_.at(worker);
    std::uint32_t depth = 0;
    while (depth < keys.size()) {
      auto it = w.where.find(keys[depth]);
      if (it == w.where.end() || it->second->expiry <= now) break;
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
  while (!it->second.lru.empty()) EvictBack(worker, it->second);
  workers_.erase(it);
}

void PredictedBlocks::Expire(Nanos now) {
  std::lock_guard lock(mu_);
  for (auto& [worker, w] : workers_) ExpireWorker(worker, w, now);
}

std::size_t PredictedBlocks::size() const {
  std::lock_guard lock(mu_);
  return size_;
}

}  // namespace kvroute::kv

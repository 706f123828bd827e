// KvIndexCore::Dump() and IndexSnapshot::Parse(): writing the snapshot image and reading it
// back into validated records. The format is in kv/index/index_snapshot_format.h; applying the
// records (Restore, RestoreWorker) is index_restore.cc.
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "kv/index/index_core.h"
#include "kv/index/index_snapshot.h"
#include "kv/index/index_snapshot_format.h"

namespace kvroute::kv {
namespace {

static_assert(std::endian::native == std::endian::little, "snapshot assumes little-endian");

using index_detail::kNoSnapshotNode;
using index_detail::kSnapshotMagic;
using index_detail::kSnapshotVersion;
using index_detail::kSnapshotVersionV1;
using index_detail::SnapshotData;

class Writer {
 public:
  template <typename T>
  void Put(T v) {
    out_.append(reinterpret_cast<const char*>(&v), sizeof(v));
  }
  void PutBytes(const char* p, std::size_t n) { out_.append(p, n); }
  std::string& str() { return out_; }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  template <typename T>
  bool Get(T* v) {
    if (in_.size() - pos_ < sizeof(T)) return false;
    std::memcpy(v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  // A count is plausible only if that many records of `record_bytes` can still follow.
  bool GetCount(std::uint64_t* n, std::size_t record_bytes) {
    return Get(n) && *n <= (in_.size() - pos_) / record_bytes;
  }
  bool AtEnd() const { return pos_ == in_.size(); }

 private:
  std::string_view in_;
  std::size_t pos_ = 0;
};

// Position of `key` in nodes sorted by key, or kNoSnapshotNode.
std::uint32_t PositionOf(const std::vector<index_detail::SnapshotNode>& nodes, BlockKey key) {
  auto it = std::lower_bound(nodes.begin(), nodes.end(), key,
                             [](const index_detail::SnapshotNode& n, BlockKey k) { return n.key < k; });
  if (it == nodes.end() || it->key != key) return kNoSnapshotNode;
  return static_cast<std::uint32_t>(it - nodes.begin());
}

}  // namespace

std::string KvIndexCore::Dump() const {
  std::shared_lock lock(mu_);
  // Records are written in sorted order so equal index contents give equal images.
  Writer w;
  w.PutBytes(kSnapshotMagic, sizeof(kSnapshotMagic));
  w.Put<std::uint32_t>(kSnapshotVersion);
  w.Put<std::uint32_t>(keyer_.block_size());
  w.Put<std::uint64_t>(keyer_.seed());
  std::vector<std::pair<BlockKey, std::uint32_t>> nodes;
  nodes.reserve(node_of_key_.size());
  node_of_key_.ForEach([&](std::uint32_t id) { nodes.emplace_back(nodes_[id].key, id); });
  std::sort(nodes.begin(), nodes.end());
  w.Put<std::uint64_t>(nodes.size());
  for (const auto& [key, id] : nodes) {
    const Node& n = nodes_[id];
    w.Put<std::uint64_t>(key);
    w.Put<std::uint8_t>(n.parent != kNoNode);
    w.Put<std::uint64_t>(n.parent != kNoNode ? nodes_[n.parent].key : 0);
  }
  std::vector<std::pair<WorkerId, std::uint32_t>> workers;
  for (std::uint32_t slot = 0; slot < workers_.size(); ++slot) {
    if (workers_[slot].live) workers.emplace_back(workers_[slot].id, slot);
  }
  std::sort(workers.begin(), workers.end());
  // Workers whose hashes are their keys have no engine map: their mappings (key, node,
  // refs) come from one scan of every node's holders for all of them.
  struct Mapping {
    EngineHash hash;
    std::uint32_t node;
    std::uint32_t refs;
  };
  std::vector<std::vector<Mapping>> keyed(workers_.size());
  bool any_keyed = false;
  for (const auto& [id, slot] : workers) any_keyed |= workers_[slot].hashes_are_keys;
  for (std::uint32_t id = 0; any_keyed && id < nodes_.size(); ++id) {
    for (const Entry& e : nodes_[id].holders) {
      const std::uint32_t refs = e.ref[0] + e.ref[1] + e.ref[2] + e.ref[3];
      if (refs != 0 && workers_[e.slot].hashes_are_keys) {
        keyed[e.slot].push_back(Mapping{nodes_[id].key, id, refs});
      }
    }
  }
  w.Put<std::uint64_t>(workers.size());
  for (const auto& [id, slot] : workers) {
    const WorkerState& ws = workers_[slot];
    w.Put<std::uint32_t>(id);
    w.Put<std::uint8_t>(ws.stale);
    w.Put<std::uint8_t>(ws.applied_seq.has_value());
    w.Put<std::uint64_t>(ws.applied_seq.value_or(0));
    std::vector<Mapping> hashes = std::move(keyed[slot]);
    ws.engine.ForEach(LoOf(slot), [&](std::uint64_t hash, std::uint32_t node, std::uint32_t refs) {
      hashes.push_back(Mapping{hash, node, refs});
    });
    std::sort(hashes.begin(), hashes.end(),
              [](const Mapping& a, const Mapping& b) { return a.hash < b.hash; });
    w.Put<std::uint64_t>(hashes.size());
    std::vector<std::pair<BlockKey, std::uint32_t>> held;
    for (const Mapping& m : hashes) {
      w.Put<std::uint64_t>(m.hash);
      w.Put<std::uint64_t>(nodes_[m.node].key);
      w.Put<std::uint32_t>(m.refs);
      held.emplace_back(nodes_[m.node].key, m.node);
    }
    std::sort(held.begin(), held.end());
    held.erase(std::unique(held.begin(), held.end()), held.end());
    w.Put<std::uint64_t>(held.size());
    for (const auto& [key, node] : held) {
      const std::optional<Entry> it = nodes_[node].holders.Find(slot);
      w.Put<std::uint64_t>(key);
      for (int t = 0; t < kNumTiers; ++t) w.Put<std::uint16_t>(it->ref[t]);
    }
  }
  w.Put<std::uint64_t>(XXH3_64bits(w.str().data(), w.str().size()));
  return std::move(w.str());
}


std::expected<IndexSnapshot, std::string> IndexSnapshot::Parse(std::string_view image,
                                                               const BlockKeyer& keyer) {
  using Err = std::unexpected<std::string>;
  if (image.size() < sizeof(kSnapshotMagic) + 8 + 8 + 8) return Err("snapshot: truncated");
  if (std::memcmp(image.data(), kSnapshotMagic, sizeof(kSnapshotMagic)) != 0) {
    return Err("snapshot: bad magic");
  }
  std::uint64_t stored_sum;
  std::memcpy(&stored_sum, image.data() + image.size() - 8, 8);
  const std::string_view body = image.substr(0, image.size() - 8);
  if (XXH3_64bits(body.data(), body.size()) != stored_sum) return Err("snapshot: bad checksum");

  auto data = std::make_shared<SnapshotData>();
  Reader r(body.substr(sizeof(kSnapshotMagic)));
  std::uint32_t version;
  if (!r.Get(&version) || (version != kSnapshotVersion && version != kSnapshotVersionV1)) {
    return Err("snapshot: unsupported version");
  }
  data->version = version;
  const bool has_seqs = version >= 2;
  if (!r.Get(&data->block_size) || !r.Get(&data->seed)) return Err("snapshot: truncated header");
  if (data->block_size != keyer.block_size() || data->seed != keyer.seed()) {
    return Err("snapshot: block size or key seed differs from this index's keyer");
  }
  std::uint64_t count;
  if (!r.GetCount(&count, 17)) return Err("snapshot: bad node count");
  // Nodes: read with their parents' keys, sorted by key, then parents turned into positions.
  std::vector<std::pair<BlockKey, std::optional<BlockKey>>> raw(count);
  for (auto& [key, parent] : raw) {
    std::uint8_t has_parent;
    BlockKey p;
    if (!r.Get(&key) || !r.Get(&has_parent) || !r.Get(&p)) return Err("snapshot: truncated");
    if (has_parent != 0) parent = p;
  }
  std::sort(raw.begin(), raw.end());
  data->nodes.resize(raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) {
    if (i > 0 && raw[i].first == raw[i - 1].first) return Err("snapshot: dup node");
    data->nodes[i].key = raw[i].first;
  }
  for (std::size_t i = 0; i < raw.size(); ++i) {
    if (!raw[i].second) continue;
    data->nodes[i].parent = PositionOf(data->nodes, *raw[i].second);
    if (data->nodes[i].parent == kNoSnapshotNode) return Err("snapshot: node parent missing");
  }
  raw = {};
  // Parent links are acyclic.
  std::vector<std::uint8_t> state(data->nodes.size(), 0);  // 0 new, 1 on path, 2 checked
  std::vector<std::uint32_t> path;
  for (std::uint32_t start = 0; start < data->nodes.size(); ++start) {
    path.clear();
    std::uint32_t cur = start;
    while (state[cur] == 0) {
      state[cur] = 1;
      path.push_back(cur);
      cur = data->nodes[cur].parent;
      if (cur == kNoSnapshotNode) break;
      if (state[cur] == 1) return Err("snapshot: parent cycle");
    }
    for (std::uint32_t p : path) state[p] = 2;
  }
  if (!r.GetCount(&count, has_seqs ? 22 : 13)) return Err("snapshot: bad worker count");
  data->workers.resize(count);
  for (auto& w : data->workers) {
    std::uint8_t stale;
    if (!r.Get(&w.id) || !r.Get(&stale)) return Err("snapshot: truncated");
    w.stale = stale != 0;
    if (has_seqs) {
      std::uint8_t has_seq;
      std::uint64_t seq;
      if (!r.Get(&has_seq) || !r.Get(&seq)) return Err("snapshot: truncated");
      if (has_seq > 1 || (has_seq == 0 && seq != 0)) return Err("snapshot: bad applied seq");
      if (has_seq != 0) w.applied_seq = seq;
    }
    if (!r.GetCount(&count, 20)) return Err("snapshot: bad hash count");
    w.hashes.resize(count);
    std::unordered_map<std::uint32_t, std::uint64_t> refs_by_node;
    std::unordered_set<EngineHash> seen_hashes;
    for (auto& h : w.hashes) {
      BlockKey node_key;
      if (!r.Get(&h.hash) || !r.Get(&node_key) || !r.Get(&h.refs)) return Err("snapshot: truncated");
      h.node = PositionOf(data->nodes, node_key);
      if (h.refs == 0 || h.node == kNoSnapshotNode) return Err("snapshot: bad hash record");
      if (!seen_hashes.insert(h.hash).second) return Err("snapshot: duplicate hash");
      refs_by_node[h.node] += h.refs;
      w.hashes_are_keys = w.hashes_are_keys && h.hash == node_key;
    }
    if (!r.GetCount(&count, 16)) return Err("snapshot: bad entry count");
    w.entries.resize(count);
    for (auto& e : w.entries) {
      BlockKey node_key;
      if (!r.Get(&node_key)) return Err("snapshot: truncated");
      e.node = PositionOf(data->nodes, node_key);
      std::uint64_t total = 0;
      for (auto& v : e.ref) {
        std::uint16_t v16;
        if (!r.Get(&v16)) return Err("snapshot: truncated");
        if (v16 > 0xFF) return Err("snapshot: reference count out of range");
        v = static_cast<std::uint8_t>(v16);
        total += v16;
      }
      auto it = e.node == kNoSnapshotNode ? refs_by_node.end() : refs_by_node.find(e.node);
      if (it == refs_by_node.end() || it->second != total) {
        return Err("snapshot: entry refs disagree with hash refs");
      }
      refs_by_node.erase(it);  // also rejects duplicate entries
    }
    if (!refs_by_node.empty()) return Err("snapshot: hash without entry");
  }
  if (!r.AtEnd()) return Err("snapshot: trailing bytes");
  std::sort(data->workers.begin(), data->workers.end(),
            [](const auto& a, const auto& b) { return a.id < b.id; });
  for (std::size_t i = 1; i < data->workers.size(); ++i) {
    if (data->workers[i].id == data->workers[i - 1].id) return Err("snapshot: duplicate worker");
  }
  return IndexSnapshot(std::move(data));
}

const index_detail::SnapshotWorker* SnapshotData::FindWorker(WorkerId id) const {
  auto it = std::lower_bound(workers.begin(), workers.end(), id,
                             [](const index_detail::SnapshotWorker& w, WorkerId v) { return w.id < v; });
  return it != workers.end() && it->id == id ? &*it : nullptr;
}

std::vector<WorkerId> IndexSnapshot::workers() const {
  std::vector<WorkerId> out;
  for (const auto& w : data_->workers) out.push_back(w.id);
  return out;
}
bool IndexSnapshot::has_worker(WorkerId worker) const { return data_->FindWorker(worker) != nullptr; }
std::size_t IndexSnapshot::entries(WorkerId worker) const {
  const auto* w = data_->FindWorker(worker);
  return w == nullptr ? 0 : w->entries.size();
}
std::optional<std::uint64_t> IndexSnapshot::applied_seq(WorkerId worker) const {
  const auto* w = data_->FindWorker(worker);
  return w == nullptr ? std::nullopt : w->applied_seq;
}
std::uint32_t IndexSnapshot::version() const { return data_->version; }
std::size_t IndexSnapshot::nodes() const { return data_->nodes.size(); }
std::uint32_t IndexSnapshot::block_size() const { return data_->block_size; }
std::uint64_t IndexSnapshot::seed() const { return data_->seed; }

}  // namespace kvroute::kv

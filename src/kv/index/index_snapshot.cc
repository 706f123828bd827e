// KvIndexCore snapshot: Dump() and Restore(). Format (all integers little-endian):
//
//   magic "KVRIDX\r\n" (8 bytes) | u32 version (=1) | u32 block_size | u64 keyer seed
//   u64 node_count   then per node:   u64 key | u8 has_parent | u64 parent_key
//   u64 worker_count then per worker: u32 id | u8 stale
//       u64 hash_count  then per hash:  u64 engine_hash | u64 node_key | u32 refs
//       u64 entry_count then per entry: u64 node_key | u16 ref[4]
//   u64 XXH3_64 of every byte before it
//
// Derived state (kids counters, orphan counts, node child counts) is rebuilt on restore by
// the same code paths that maintain it live, so a snapshot cannot carry inconsistent derived
// state. Event counters are not part of the snapshot.
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <unordered_map>

#include "kv/index/index_core.h"

namespace kvroute::kv {
namespace {

static_assert(std::endian::native == std::endian::little, "snapshot assumes little-endian");

constexpr char kMagic[8] = {'K', 'V', 'R', 'I', 'D', 'X', '\r', '\n'};
constexpr std::uint32_t kVersion = 1;

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

struct NodeRec {
  BlockKey key;
  bool has_parent;
  BlockKey parent;
};
struct HashRec {
  EngineHash hash;
  BlockKey node;
  std::uint32_t refs;
};
struct EntryRec {
  BlockKey node;
  std::array<std::uint16_t, kNumTiers> ref;
};
struct WorkerRec {
  WorkerId id;
  bool stale;
  std::vector<HashRec> hashes;
  std::vector<EntryRec> entries;
};

}  // namespace

std::string KvIndexCore::Dump() const {
  std::shared_lock lock(mu_);
  // Records are written in sorted order so equal index contents give equal images.
  Writer w;
  w.PutBytes(kMagic, sizeof(kMagic));
  w.Put<std::uint32_t>(kVersion);
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

std::expected<void, std::string> KvIndexCore::Restore(std::string_view image) {
  using Err = std::unexpected<std::string>;
  if (image.size() < sizeof(kMagic) + 8 + 8 + 8) return Err("snapshot: truncated");
  if (std::memcmp(image.data(), kMagic, sizeof(kMagic)) != 0) return Err("snapshot: bad magic");
  std::uint64_t stored_sum;
  std::memcpy(&stored_sum, image.data() + image.size() - 8, 8);
  const std::string_view body = image.substr(0, image.size() - 8);
  if (XXH3_64bits(body.data(), body.size()) != stored_sum) return Err("snapshot: bad checksum");

  Reader r(body.substr(sizeof(kMagic)));
  std::uint32_t version, block_size;
  std::uint64_t seed;
  if (!r.Get(&version) || version != kVersion) return Err("snapshot: unsupported version");
  if (!r.Get(&block_size) || !r.Get(&seed)) return Err("snapshot: truncated header");
  if (block_size != keyer_.block_size() || seed != keyer_.seed()) {
    return Err("snapshot: block size or key seed differs from this index's keyer");
  }
  // Parse everything before touching the index, so a bad image leaves it unchanged.
  std::uint64_t count;
  if (!r.GetCount(&count, 17)) return Err("snapshot: bad node count");
  std::vector<NodeRec> nodes(count);
  std::unordered_map<BlockKey, std::uint32_t> index_of;
  index_of.reserve(count);
  for (auto& n : nodes) {
    std::uint8_t hp;
    if (!r.Get(&n.key) || !r.Get(&hp) || !r.Get(&n.parent)) return Err("snapshot: truncated");
    n.has_parent = hp != 0;
    if (!index_of.emplace(n.key, &n - nodes.data()).second) return Err("snapshot: dup node");
  }
  // Every parent exists and parent links are acyclic.
  std::vector<std::uint8_t> state(nodes.size(), 0);  // 0 new, 1 on path, 2 checked
  std::vector<std::uint32_t> path;
  for (std::uint32_t start = 0; start < nodes.size(); ++start) {
    path.clear();
    std::uint32_t cur = start;
    while (state[cur] == 0) {
      state[cur] = 1;
      path.push_back(cur);
      if (!nodes[cur].has_parent) break;
      auto it = index_of.find(nodes[cur].parent);
      if (it == index_of.end()) return Err("snapshot: node parent missing");
      cur = it->second;
      if (state[cur] == 1) return Err("snapshot: parent cycle");
    }
    for (std::uint32_t p : path) state[p] = 2;
  }
  if (!r.GetCount(&count, 13)) return Err("snapshot: bad worker count");
  std::vector<WorkerRec> workers(count);
  std::unordered_map<WorkerId, bool> seen_workers;
  for (auto& w : workers) {
    std::uint8_t stale;
    if (!r.Get(&w.id) || !r.Get(&stale)) return Err("snapshot: truncated");
    if (!seen_workers.emplace(w.id, true).second) return Err("snapshot: duplicate worker");
    w.stale = stale != 0;
    if (!r.GetCount(&count, 20)) return Err("snapshot: bad hash count");
    w.hashes.resize(count);
    std::unordered_map<BlockKey, std::uint64_t> refs_by_node;
    std::unordered_map<EngineHash, bool> seen_hashes;
    for (auto& h : w.hashes) {
      if (!r.Get(&h.hash) || !r.Get(&h.node) || !r.Get(&h.refs)) return Err("snapshot: truncated");
      if (h.refs == 0 || !index_of.contains(h.node)) return Err("snapshot: bad hash record");
      if (!seen_hashes.emplace(h.hash, true).second) return Err("snapshot: duplicate hash");
      refs_by_node[h.node] += h.refs;
    }
    if (!r.GetCount(&count, 16)) return Err("snapshot: bad entry count");
    w.entries.resize(count);
    for (auto& e : w.entries) {
      if (!r.Get(&e.node)) return Err("snapshot: truncated");
      std::uint64_t total = 0;
      for (auto& v : e.ref) {
        if (!r.Get(&v)) return Err("snapshot: truncated");
        if (v > kMaxRef) return Err("snapshot: reference count out of range");
        total += v;
      }
      auto it = refs_by_node.find(e.node);
      if (it == refs_by_node.end() || it->second != total) {
        return Err("snapshot: entry refs disagree with hash refs");
      }
      refs_by_node.erase(it);  // also rejects duplicate entries
    }
    if (!refs_by_node.empty()) return Err("snapshot: hash without entry");
  }
  if (!r.AtEnd()) return Err("snapshot: trailing bytes");

  std::unique_lock lock(mu_);
  ResetLocked();
  nodes_.resize(static_cast<std::uint32_t>(nodes.size()));
  for (std::uint32_t i = 0; i < nodes.size(); ++i) {
    nodes_[i].key = nodes[i].key;
    *node_of_key_.Insert(nodes[i].key, KeyOf()).first = i;
  }
  for (std::uint32_t i = 0; i < nodes.size(); ++i) {
    if (!nodes[i].has_parent) continue;
    const std::uint32_t p = index_of.at(nodes[i].parent);
    nodes_[i].parent = p;
    AddChild(p);
  }
  // Depths: walk up to a node whose depth is known (or a root), then assign downwards.
  std::vector<std::uint8_t> known(nodes_.size(), 0);
  std::vector<std::uint32_t> chain;
  for (std::uint32_t i = 0; i < nodes_.size(); ++i) {
    chain.clear();
    std::uint32_t cur = i;
    while (!known[cur]) {
      chain.push_back(cur);
      if (nodes_[cur].parent == kNoNode) break;
      cur = nodes_[cur].parent;
    }
    std::uint32_t d = known[cur] ? DepthOf(cur) + 1 : 0;
    for (std::size_t k = chain.size(); k-- > 0;) {
      SetDepth(chain[k], d++);
      known[chain[k]] = 1;
    }
  }
  for (const WorkerRec& w : workers) {
    const std::uint32_t slot = SlotFor(w.id);
    workers_[slot].stale = w.stale;
    // A worker whose every hash is its block's key is restored without a map, as live
    // operation would have kept it (Dump writes both forms alike).
    workers_[slot].hashes_are_keys = std::all_of(w.hashes.begin(), w.hashes.end(),
                                                 [](const HashRec& h) { return h.hash == h.node; });
    for (const EntryRec& e : w.entries) {
      const std::uint32_t node = index_of.at(e.node);
      GetOrCreateEntry(node, slot);
      for (int t = 0; t < kNumTiers; ++t) {
        if (e.ref[t] == 0) continue;
        AddRef(slot, node, t);  // 0 -> 1 runs the orphan bookkeeping
        FindEntry(node, slot).set_ref(*this, t, static_cast<std::uint8_t>(e.ref[t]));
      }
    }
    // The mappings, after the entries that confirm them: the first hash of each node is
    // its entry's primary one, any other goes to the overflow map (as live operation would
    // have put them, up to which hash came first).
    std::unordered_map<std::uint32_t, bool> has_primary;
    for (const HashRec& h : w.hashes) {
      if (workers_[slot].hashes_are_keys) break;
      EngineMap& engine = workers_[slot].engine;
      const std::uint32_t node = index_of.at(h.node);
      EngineMap::Mapping mapped = engine.Insert(h.hash, LoOf(slot)).first;
      if (has_primary.emplace(node, true).second) {
        EngineMap::SetPrimary(mapped, node);
        FindEntry(node, slot).set_hash_lo(EngineMap::Lo(h.hash));
      } else {
        mapped = engine.MoveToExtra(h.hash, mapped, node);
      }
      engine.SetRefs(h.hash, mapped, h.refs);
    }
  }
  // Nodes that nothing needs (a hand-made image could list them) are dropped as live
  // operation would have.
  for (std::uint32_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].holders.empty() && nodes_[i].num_children == 0 &&
        node_of_key_.Find(nodes_[i].key, KeyOf()) != nullptr) {
      MaybeDeleteNode(i);
    }
  }
  CompactTouched();
  return {};
}

}  // namespace kvroute::kv

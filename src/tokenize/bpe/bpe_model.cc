#include "tokenize/bpe/bpe_model.h"

#include <queue>

namespace kvroute::tokenize {
namespace {

std::uint64_t MixKey(std::uint64_t key) {
  // splitmix64 finalizer: spreads (left, right) pairs over the table.
  key ^= key >> 30;
  key *= 0xBF58476D1CE4E5B9ULL;
  key ^= key >> 27;
  key *= 0x94D049BB133111EBULL;
  key ^= key >> 31;
  return key;
}

// Words up to this many bytes use the quadratic scan, which beats a heap on short input.
constexpr std::size_t kShortWord = 48;

}  // namespace

std::expected<BpeModel, std::string> BpeModel::Build(
    std::vector<std::pair<std::string, TokenId>> vocab,
    const std::vector<std::pair<std::string, std::string>>& merges, Options options) {
  BpeModel m;
  m.options_ = options;
  TokenId max_id = 0;
  for (const auto& [bytes, id] : vocab) max_id = std::max(max_id, id);
  m.id_to_bytes_.resize(vocab.empty() ? 0 : max_id + 1);
  m.has_id_.assign(m.id_to_bytes_.size(), false);
  m.bytes_to_id_.reserve(vocab.size());
  for (auto& [bytes, id] : vocab) {
    m.id_to_bytes_[id] = bytes;
    m.has_id_[id] = true;
    m.bytes_to_id_.emplace(std::move(bytes), id);
  }
  for (int b = 0; b < 256; ++b) {
    auto it = m.bytes_to_id_.find(std::string_view(reinterpret_cast<const char*>(&b), 1));
    if (it == m.bytes_to_id_.end()) {
      return std::unexpected("BPE vocabulary has no token for byte " + std::to_string(b) +
                             " (byte_fallback / unk_token models are not supported)");
    }
    m.byte_ids_[b] = it->second;
  }
  std::size_t cap = 16;
  while (cap < merges.size() * 2) cap <<= 1;
  m.merge_table_.assign(cap, MergeSlot{});
  m.merge_mask_ = cap - 1;
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    auto ia = m.bytes_to_id_.find(a), ib = m.bytes_to_id_.find(b), im = m.bytes_to_id_.find(a + b);
    if (ia == m.bytes_to_id_.end() || ib == m.bytes_to_id_.end() || im == m.bytes_to_id_.end()) {
      return std::unexpected("BPE merge " + std::to_string(rank) +
                             " refers to a token that is not in the vocabulary");
    }
    const std::uint64_t key = (std::uint64_t{ia->second} << 32) | ib->second;
    std::uint64_t slot = MixKey(key) & m.merge_mask_;
    while (m.merge_table_[slot].key != kEmpty && m.merge_table_[slot].key != key) {
      slot = (slot + 1) & m.merge_mask_;
    }
    // A repeated pair keeps its last rank, as the reference implementations' maps do.
    m.merge_table_[slot] = MergeSlot{key, static_cast<std::uint32_t>(rank), im->second};
  }
  return m;
}

std::optional<TokenId> BpeModel::Lookup(std::string_view bytes) const {
  auto it = bytes_to_id_.find(bytes);
  if (it == bytes_to_id_.end()) return std::nullopt;
  return it->second;
}

std::pair<std::uint32_t, TokenId> BpeModel::FindMerge(TokenId left, TokenId right) const {
  const std::uint64_t key = (std::uint64_t{left} << 32) | right;
  std::uint64_t slot = MixKey(key) & merge_mask_;
  while (true) {
    const MergeSlot& s = merge_table_[slot];
    if (s.key == key) return {s.rank, s.merged};
    if (s.key == kEmpty) return {kNoRank, 0};
    slot = (slot + 1) & merge_mask_;
  }
}

void BpeModel::EncodeWord(std::string_view word, std::vector<TokenId>* out) const {
  if (word.empty()) return;
  if (options_.ignore_merges || word.size() == 1) {
    if (auto it = bytes_to_id_.find(word); it != bytes_to_id_.end()) {
      out->push_back(it->second);
      return;
    }
  }
  if (word.size() <= kShortWord) {
    EncodeShort(word, out);
  } else {
    EncodeLong(word, out);
  }
}

void BpeModel::EncodeShort(std::string_view word, std::vector<TokenId>* out) const {
  TokenId sym[kShortWord];
  std::uint32_t rank[kShortWord];  // rank[i]: merge rank of (sym[i], sym[i+1])
  TokenId merged[kShortWord];
  std::size_t n = word.size();
  for (std::size_t i = 0; i < n; ++i) sym[i] = byte_ids_[static_cast<unsigned char>(word[i])];
  for (std::size_t i = 0; i + 1 < n; ++i)
    std::tie(rank[i], merged[i]) = FindMerge(sym[i], sym[i + 1]);
  while (n > 1) {
    std::size_t best = 0;
    for (std::size_t i = 1; i + 1 < n; ++i) {
      if (rank[i] < rank[best]) best = i;
    }
    if (rank[best] == kNoRank) break;
    sym[best] = merged[best];
    for (std::size_t i = best + 1; i + 1 < n; ++i) {
      sym[i] = sym[i + 1];
      rank[i] = rank[i + 1];
      merged[i] = merged[i + 1];
    }
    --n;
    if (best > 0) std::tie(rank[best - 1], merged[best - 1]) = FindMerge(sym[best - 1], sym[best]);
    if (best + 1 < n) std::tie(rank[best], merged[best]) = FindMerge(sym[best], sym[best + 1]);
  }
  out->insert(out->end(), sym, sym + n);
}

void BpeModel::EncodeLong(std::string_view word, std::vector<TokenId>* out) const {
  // Doubly linked symbols; a min-heap of candidate merges ordered by (rank, position of the
  // left symbol). Entries go stale when a neighbour merges; they are checked on pop.
  const std::size_t n = word.size();
  struct Symbol {
    TokenId id;
    std::int32_t prev, next;
    bool alive;
  };
  std::vector<Symbol> s(n);
  for (std::size_t i = 0; i < n; ++i) {
    s[i] = Symbol{byte_ids_[static_cast<unsigned char>(word[i])], static_cast<std::int32_t>(i) - 1,
                  i + 1 < n ? static_cast<std::int32_t>(i + 1) : -1, true};
  }
  using Entry = std::pair<std::uint32_t, std::int32_t>;  // (rank, left position)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
  const auto push = [&](std::int32_t pos) {
    if (pos < 0 || s[pos].next < 0) return;
    const auto [r, m] = FindMerge(s[pos].id, s[s[pos].next].id);
    if (r != kNoRank) heap.emplace(r, pos);
  };
  for (std::size_t i = 0; i + 1 < n; ++i) push(static_cast<std::int32_t>(i));
  while (!heap.empty()) {
    const auto [r, pos] = heap.top();
    heap.pop();
    Symbol& left = s[pos];
    if (!left.alive || left.next < 0) continue;
    const auto [cur_rank, merged] = FindMerge(left.id, s[left.next].id);
    if (cur_rank != r) continue;  // the pair changed since this entry was pushed
    Symbol& right = s[left.next];
    left.id = merged;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) s[right.next].prev = pos;
    push(left.prev);
    push(pos);
  }
  for (std::int32_t i = 0; i >= 0; i = s[i].next) out->push_back(s[i].id);
}

}  // namespace kvroute::tokenize

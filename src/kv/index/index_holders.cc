// HolderList (KvIndexCore::HolderList): a node's entries in one word, one small entry packed inline,
// the rest in a heap block with the capacity, size and lane count in its header (see
// index_holders.h). The inline cases and the pooled block of one entry are handled in the header;
// these are the searches, inserts and erases of lists with several entries.
#include "kv/index/index_holders.h"

#include <algorithm>
#include <cstring>

namespace kvroute::kv::index_detail {

Entry* HolderList::LowerBoundSlow(std::uint32_t slot) {
  Entry* d = heap()->entries();
  return std::lower_bound(d, d + heap()->size, slot,
                          [](const Entry& e, std::uint32_t s) { return e.slot < s; });
}

Entry* HolderList::insert(Entry* pos, const Entry& e, BlockPool& pool) {
  assert(!is_inline());
  if (word_ == 0) {
    Heap* h = NewHeap(kSmallCap, &pool);
    h->entries()[0] = e;
    h->size = 1;
    h->lane_count = LanesOf(e);
    set_heap(h);
    return h->entries();
  }
  Heap* h = heap();
  const std::uint32_t n = h->size;
  const std::size_t at = static_cast<std::size_t>(pos - h->entries());
  if (n == h->cap) {
    Heap* grown = NewHeap(h->cap + (h->cap + 1) / 2, &pool);
    grown->lane_count = h->lane_count;
    std::memcpy(grown->entries(), h->entries(), n * sizeof(Entry));
    FreeHeap(h, &pool);
    set_heap(grown);
    h = grown;
  }
  Entry* d = h->entries();
  if (at < n) std::memmove(d + at + 1, d + at, (n - at) * sizeof(Entry));
  d[at] = e;
  h->lane_count += LanesOf(e);
  h->size = n + 1;
  return d + at;
}

void HolderList::erase(Entry* pos, BlockPool& pool) {
  assert(is_heap());
  Heap* h = heap();
  Entry* d = h->entries();
  const std::uint32_t n = h->size - 1;  // after the erase
  const std::size_t at = static_cast<std::size_t>(pos - d);
  h->lane_count -= LanesOf(*pos);
  if (at < n) std::memmove(d + at, d + at + 1, (n - at) * sizeof(Entry));
  h->size = n;
  if (n == 0) {
    FreeHeap(h, &pool);
    word_ = 0;
  } else if (h->cap > 8 && n * 4 < h->cap) {  // shrink
    Heap* smaller = NewHeap(n * 2, &pool);
    smaller->lane_count = h->lane_count;
    smaller->size = n;
    std::memcpy(smaller->entries(), d, n * sizeof(Entry));
    FreeHeap(h, &pool);
    set_heap(smaller);
  }
}

}  // namespace kvroute::kv::index_detail

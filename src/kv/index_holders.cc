// KvIndex::HolderList: a node's entries, one inline, two or more in a heap block with the
// capacity and the node's lane count in its header (see index.h).
#include <algorithm>
#include <cstring>
#include <new>

#include "kv/index.h"

namespace kvroute::kv {

KvIndex::HolderList::Heap* KvIndex::HolderList::NewHeap(std::uint32_t cap) {
  auto* h = static_cast<Heap*>(::operator new(sizeof(Heap) + cap * sizeof(Entry)));
  h->cap = cap;
  h->lane_count = 0;
  return h;
}

KvIndex::Entry* KvIndex::HolderList::LowerBoundHeap(std::uint32_t slot) {
  Entry* d = heap()->entries();
  return std::lower_bound(d, d + size(), slot,
                          [](const Entry& e, std::uint32_t s) { return e.slot < s; });
}

KvIndex::Entry* KvIndex::HolderList::InsertSlow(Entry* pos, const Entry& e) {
  const std::size_t at = static_cast<std::size_t>(pos - begin());
  const std::uint32_t n = static_cast<std::uint32_t>(size());
  if (n == 1) {  // inline -> heap
    Heap* h = NewHeap(2);
    h->lane_count = LanesOf(one_);
    h->entries()[0] = one_;
    set_heap(h, 1);
  } else if (n == heap()->cap) {
    Heap* old = heap();
    Heap* h = NewHeap(old->cap + (old->cap + 1) / 2);
    h->lane_count = old->lane_count;
    std::memcpy(h->entries(), old->entries(), n * sizeof(Entry));
    ::operator delete(old);
    set_heap(h, n);
  }
  Heap* h = heap();
  Entry* d = h->entries();
  std::memmove(d + at + 1, d + at, (n - at) * sizeof(Entry));
  d[at] = e;
  h->lane_count += LanesOf(e);
  set_size(n + 1);
  return d + at;
}

void KvIndex::HolderList::EraseHeap(Entry* pos) {
  Heap* h = heap();
  Entry* d = h->entries();
  const std::uint32_t n = static_cast<std::uint32_t>(size()) - 1;  // after the erase
  const std::size_t at = static_cast<std::size_t>(pos - d);
  h->lane_count -= LanesOf(*pos);
  std::memmove(d + at, d + at + 1, (n - at) * sizeof(Entry));
  if (n == 1) {  // back to inline; the lane count is derived from the entry again
    one_ = d[0];
    ::operator delete(h);
  } else if (h->cap > 8 && n * 4 < h->cap) {  // shrink
    Heap* smaller = NewHeap(n * 2);
    smaller->lane_count = h->lane_count;
    std::memcpy(smaller->entries(), d, n * sizeof(Entry));
    ::operator delete(h);
    set_heap(smaller, n);
  } else {
    set_size(n);
  }
}

void KvIndex::HolderList::clear() {
  if (is_heap()) ::operator delete(heap());
  one_.slot = kEmptyWord;
}

void KvIndex::HolderList::Take(HolderList& o) {
  one_ = o.one_;  // the entry or the heap tag and pointer
  o.one_.slot = kEmptyWord;
}

}  // namespace kvroute::kv

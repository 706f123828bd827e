// KvIndex::HolderList: a node's entries, one inline, more on the heap (see index.h).
#include <algorithm>
#include <cstring>
#include <new>

#include "kv/index.h"

namespace kvroute::kv {

KvIndex::Entry* KvIndex::HolderList::LowerBoundHeap(std::uint32_t slot) {
  return std::lower_bound(heap_, heap_ + size_, slot,
                          [](const Entry& e, std::uint32_t s) { return e.slot < s; });
}

KvIndex::Entry* KvIndex::HolderList::InsertSlow(Entry* pos, const Entry& e) {
  const std::size_t at = static_cast<std::size_t>(pos - begin());
  if (cap_ == 0 && size_ == 0) {
    one_ = e;
    size_ = 1;
    return &one_;
  }
  if (cap_ == 0 || size_ == cap_) {
    const std::uint32_t new_cap = cap_ == 0 ? 2 : cap_ + (cap_ + 1) / 2;
    Entry* grown = static_cast<Entry*>(::operator new(new_cap * sizeof(Entry)));
    std::memcpy(grown, begin(), size_ * sizeof(Entry));
    if (cap_ != 0) ::operator delete(heap_);
    heap_ = grown;
    cap_ = new_cap;
  }
  Entry* d = begin();
  std::memmove(d + at + 1, d + at, (size_ - at) * sizeof(Entry));
  d[at] = e;
  ++size_;
  return d + at;
}

void KvIndex::HolderList::EraseHeap(Entry* pos) {
  Entry* d = begin();
  const std::size_t at = static_cast<std::size_t>(pos - d);
  std::memmove(d + at, d + at + 1, (size_ - at - 1) * sizeof(Entry));
  --size_;
  if (cap_ != 0 && size_ <= 1) {  // back to inline
    Entry* heap = heap_;
    if (size_ == 1) one_ = heap[0];
    ::operator delete(heap);
    cap_ = 0;
  } else if (cap_ > 8 && size_ * 4 < cap_) {  // shrink
    const std::uint32_t new_cap = size_ * 2;
    Entry* smaller = static_cast<Entry*>(::operator new(new_cap * sizeof(Entry)));
    std::memcpy(smaller, heap_, size_ * sizeof(Entry));
    ::operator delete(heap_);
    heap_ = smaller;
    cap_ = new_cap;
  }
}

void KvIndex::HolderList::clear() {
  if (cap_ != 0) ::operator delete(heap_);
  cap_ = 0;
  size_ = 0;
}

void KvIndex::HolderList::Take(HolderList& o) {
  size_ = o.size_;
  cap_ = o.cap_;
  if (cap_ == 0) {
    one_ = o.one_;
  } else {
    heap_ = o.heap_;
  }
  o.size_ = 0;
  o.cap_ = 0;
}

}  // namespace kvroute::kv

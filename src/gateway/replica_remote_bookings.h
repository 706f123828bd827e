// RemoteBookings: what this replica holds of its siblings' bookings and predicted blocks,
// applied from their delta streams (docs/replicas.md) into the shared router state, so the
// snapshot the policy reads counts every replica's requests on each worker.
//
//   booked       RouterState::Book on the local worker of that name, under a remote id
//                (bit 62: IsRemoteBookingId), observe_prefill false and no prediction, so
//                the sibling's request adds load but teaches nothing; first_token_seen →
//                OnFirstToken at once
//   first_token  RouterState::OnFirstToken (its pending prefill is done)
//   released     RouterState::Cancel (no learning), the entry forgotten
//   predicted    PredictedBlocks::Record on the local worker of that name
//   DropSource   the sibling's stream ended: every booking it sent is released at once
//   Expire       bookings older than the TTL are released (a lost release; counted)
//
// Sources are instance ids (the hello delta's), so one sibling reached under two URLs is one
// source, and a restarted sibling (new instance) never inherits its old life's bookings.
// A worker name this replica does not know is skipped and counted; a duplicate booked id
// from the same source is ignored.
//
// Ownership: borrows the router state and the predicted blocks (may be null: approximate
// mode without an overlay still has one; tests may pass null), which must outlive it.
// Thread safety: every method takes one internal mutex; RouterState and PredictedBlocks are
// called under it (they never call back).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "common/types.h"
#include "gateway/replica_delta_codec.h"

namespace kvroute::fleet {
class RouterState;
}
namespace kvroute::kv {
class PredictedBlocks;
}

namespace kvroute::gateway {

// Remote bookings' ids: bit 62 set, bit 63 clear. Local ids never set bit 62 (the proxy's
// count from 1; P/D prefill legs and the EPP's set bit 63).
inline constexpr RequestId kRemoteBookingBit = RequestId{1} << 62;
inline constexpr bool IsRemoteBookingId(RequestId id) { return (id >> 62) == 1; }

struct RemoteBookingCounters {
  std::uint64_t deltas = 0;          // applied (hello excluded)
  std::uint64_t expired = 0;         // released by Expire
  std::uint64_t unknown_worker = 0;  // booked/predicted naming a worker we do not have
  std::uint64_t held = 0;            // remote bookings held now
  std::uint64_t sources = 0;         // sources holding at least one booking
};

class RemoteBookings {
 public:
  RemoteBookings(fleet::RouterState* state, kv::PredictedBlocks* predicted, Nanos ttl);
  RemoteBookings(const RemoteBookings&) = delete;
  RemoteBookings& operator=(const RemoteBookings&) = delete;

  // Applies `deltas` received from `source` at `now` (hello deltas are ignored here: the
  // subscriber reads them).
  void Apply(std::uint64_t source, const std::vector<Delta>& deltas, Nanos now);
  // The source's stream ended: releases every booking it sent. Returns how many.
  std::size_t DropSource(std::uint64_t source, Nanos now);
  // Releases bookings that arrived more than the TTL before `now`. Returns how many.
  std::size_t Expire(Nanos now);

  RemoteBookingCounters Counters() const;
  std::size_t HeldFrom(std::uint64_t source) const;

 private:
  struct Entry {
    RequestId local = 0;
    Nanos arrived{0};
  };
  using Source = std::unordered_map<RequestId, Entry>;  // the sibling's id → ours
  void ApplyOne(Source& source, const Delta& delta, Nanos now);  // REQUIRES: mu_ held

  fleet::RouterState* const state_;
  kv::PredictedBlocks* const predicted_;
  const Nanos ttl_;
  mutable std::mutex mu_;
  std::map<std::uint64_t, Source> sources_;  // guarded by mu_
  RequestId next_ = 1;                       // guarded by mu_
  RemoteBookingCounters counters_;           // guarded by mu_ (held, sources computed)
};

}  // namespace kvroute::gateway

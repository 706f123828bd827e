#include "gateway/replica_remote_bookings.h"

#include "fleet/router_state.h"
#include "kv/index/approx_predicted.h"

namespace kvroute::gateway {

RemoteBookings::RemoteBookings(fleet::RouterState* state, kv::PredictedBlocks* predicted,
                               Nanos ttl)
    : state_(state), predicted_(predicted), ttl_(ttl) {}

void RemoteBookings::Apply(std::uint64_t source, const std::vector<Delta>& deltas, Nanos now) {
  std::lock_guard lock(mu_);
  Source& s = sources_[source];
  for (const Delta& d : deltas) ApplyOne(s, d, now);
  if (s.empty()) sources_.erase(source);
}

void RemoteBookings::ApplyOne(Source& s, const Delta& delta, Nanos now) {
  if (std::holds_alternative<HelloDelta>(delta)) return;
  ++counters_.deltas;
  if (const auto* b = std::get_if<BookedDelta>(&delta)) {
    if (s.contains(b->id)) return;
    const auto worker = state_->FindByName(b->worker);
    if (!worker) {
      ++counters_.unknown_worker;
      return;
    }
    fleet::RoutedRequest r;
    r.worker = *worker;
    r.prompt_tokens = b->prompt_tokens;
    r.uncached_tokens = std::min(b->uncached_tokens, b->prompt_tokens);
    r.kv_blocks = b->kv_blocks;
    r.observe_prefill = false;  // a sibling's timing, shifted by the delta lag: not a sample
    const RequestId local = kRemoteBookingBit | next_++;
    if (!state_->Book(local, r, now)) return;
    if (b->first_token_seen) state_->OnFirstToken(local, now);
    s.emplace(b->id, Entry{local, now});
  } else if (const auto* f = std::get_if<FirstTokenDelta>(&delta)) {
    if (auto it = s.find(f->id); it != s.end()) state_->OnFirstToken(it->second.local, now);
  } else if (const auto* r = std::get_if<ReleasedDelta>(&delta)) {
    if (auto it = s.find(r->id); it != s.end()) {
      state_->Cancel(it->second.local, now);
      s.erase(it);
    }
  } else if (const auto* p = std::get_if<PredictedDelta>(&delta)) {
    const auto worker = state_->FindByName(p->worker);
    if (!worker) {
      ++counters_.unknown_worker;
      return;
    }
    if (predicted_ != nullptr && !p->keys.empty()) predicted_->Record(*worker, p->keys, now);
  }
}

std::size_t RemoteBookings::DropSource(std::uint64_t source, Nanos now) {
  std::lock_guard lock(mu_);
  auto it = sources_.find(source);
  if (it == sources_.end()) return 0;
  const std::size_t n = it->second.size();
  for (const auto& [id, e] : it->second) state_->Cancel(e.local, now);
  sources_.erase(it);
  return n;
}

std::size_t RemoteBookings::Expire(Nanos now) {
  std::lock_guard lock(mu_);
  std::size_t n = 0;
  for (auto s = sources_.begin(); s != sources_.end();) {
    for (auto it = s->second.begin(); it != s->second.end();) {
      if (now - it->second.arrived >= ttl_) {
        state_->Cancel(it->second.local, now);
        it = s->second.erase(it);
        ++n;
      } else {
        ++it;
      }
    }
    s = s->second.empty() ? sources_.erase(s) : std::next(s);
  }
  counters_.expired += n;
  return n;
}

RemoteBookingCounters RemoteBookings::Counters() const {
  std::lock_guard lock(mu_);
  RemoteBookingCounters c = counters_;
  c.held = 0;
  for (const auto& [id, s] : sources_) c.held += s.size();
  c.sources = sources_.size();
  return c;
}

std::size_t RemoteBookings::HeldFrom(std::uint64_t source) const {
  std::lock_guard lock(mu_);
  auto it = sources_.find(source);
  return it == sources_.end() ? 0 : it->second.size();
}

}  // namespace kvroute::gateway

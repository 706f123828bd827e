#include "engine/kv_transfer.h"

#include <algorithm>
#include <cassert>
#include <limits>

namespace kvroute::engine {

double KvTransferBytesPerToken(const ModelSpec& m, std::uint32_t decode_tp) {
  const double tp = std::max<std::uint32_t>(decode_tp, 1);
  const double layers = m.num_layers;
  if (m.mla) {
    // Every decode rank needs the whole latent: it is shared by all heads.
    return tp * layers * (m.kv_lora_rank + m.qk_rope_head_dim) * m.kv_bytes_per_element;
  }
  // Each rank gets its heads; with more ranks than KV heads, heads are replicated.
  const double heads = std::max<double>(m.num_kv_heads, tp);
  return 2.0 * layers * heads * m.head_dim * m.kv_bytes_per_element;
}

std::uint32_t KvTransferLanes(std::uint32_t prefill_tp, std::uint32_t decode_tp) {
  return std::max<std::uint32_t>(1, std::min(prefill_tp, decode_tp));
}

Nanos KvTransferTime(double bytes, std::uint32_t lanes, const LinkSpec& link) {
  const double rate = link.bandwidth_bytes_per_s * std::max<std::uint32_t>(lanes, 1);
  return FromSeconds(link.latency_s + (rate > 0 ? bytes / rate : 0.0));
}

SharedLink::SharedLink(const LinkSpec& link, std::uint32_t lanes)
    : link_(link), capacity_(link.bandwidth_bytes_per_s * std::max<std::uint32_t>(lanes, 1)) {}

void SharedLink::Start(std::uint64_t id, double bytes, std::uint32_t lanes, Nanos now) {
  AdvanceTo(now);  // finished flows stay queued for the caller's next AdvanceTo
  Flow f;
  f.id = id;
  f.remaining = std::max(0.0, bytes);
  f.bytes = f.remaining;
  // A transfer cannot use more lanes than the engine has.
  f.cap = std::min(capacity_, link_.bandwidth_bytes_per_s * std::max<std::uint32_t>(lanes, 1));
  f.started = now;
  if (f.remaining <= 0) f.drained = now;
  flows_.push_back(f);
  AssignRates();
}

void SharedLink::Cancel(std::uint64_t id) {
  auto it = std::find_if(flows_.begin(), flows_.end(), [id](const Flow& f) { return f.id == id; });
  if (it == flows_.end()) return;
  flows_.erase(it);
  AssignRates();
}

void SharedLink::AssignRates() {
  // Max-min fairness (water filling): serve the smallest caps first; what a capped flow
  // cannot use is shared by the others.
  std::vector<Flow*> draining;
  for (Flow& f : flows_) {
    f.rate = 0;
    if (!f.drained) draining.push_back(&f);
  }
  std::sort(draining.begin(), draining.end(),
            [](const Flow* a, const Flow* b) { return a->cap < b->cap; });
  double left = capacity_;
  for (std::size_t i = 0; i < draining.size(); ++i) {
    const double share = left / static_cast<double>(draining.size() - i);
    draining[i]->rate = std::min(draining[i]->cap, share);
    left -= draining[i]->rate;
  }
}

std::optional<double> SharedLink::NextDrainSeconds() const {
  std::optional<double> best;
  for (const Flow& f : flows_) {
    if (f.drained || f.rate <= 0) continue;
    const double s = f.remaining / f.rate;
    if (!best || s < *best) best = s;
  }
  return best;
}

std::vector<SharedLink::Finished> SharedLink::AdvanceTo(Nanos now) {
  std::vector<Finished> done;
  const Nanos latency = FromSeconds(link_.latency_s);
  while (now_ < now) {
    const std::optional<double> next = NextDrainSeconds();
    const double span = ToSeconds(now - now_);
    const double step = next ? std::min(*next, span) : span;
    for (Flow& f : flows_) {
      if (f.drained) continue;
      f.remaining -= f.rate * step;
    }
    now_ = next && *next < span ? now_ + FromSeconds(*next) : now;
    bool changed = false;
    for (Flow& f : flows_) {
      // Nanosecond rounding of `step` can leave a few bytes: treat < 1 byte as drained.
      if (!f.drained && f.remaining < 1.0) {
        f.remaining = 0;
        f.drained = now_;
        changed = true;
      }
    }
    if (changed) AssignRates();
    if (!next || *next >= span) break;
  }
  now_ = std::max(now_, now);
  // Drained flows finish once their latency has passed, earliest first.
  std::vector<Flow> keep;
  for (Flow& f : flows_) {
    if (f.drained && *f.drained + latency <= now_) {
      done.push_back({.id = f.id, .started = f.started, .finished = *f.drained + latency,
                      .bytes = f.bytes});
    } else {
      keep.push_back(f);
    }
  }
  flows_.swap(keep);
  std::sort(done.begin(), done.end(),
            [](const Finished& a, const Finished& b) { return a.finished < b.finished; });
  return done;
}

std::optional<Nanos> SharedLink::NextCompletion() const {
  const Nanos latency = FromSeconds(link_.latency_s);
  std::optional<Nanos> best;
  auto consider = [&best](Nanos t) {
    if (!best || t < *best) best = t;
  };
  for (const Flow& f : flows_) {
    if (f.drained) consider(*f.drained + latency);
  }
  if (const std::optional<double> next = NextDrainSeconds()) {
    // Round up so that AdvanceTo(the returned time) sees the flow drained.
    consider(now_ + FromSeconds(*next) + Nanos(1) + latency);
  }
  return best;
}

}  // namespace kvroute::engine

#include "fleet/booking.h"

#include <algorithm>

namespace kvroute::fleet {

CachedPrefix CachedPrefixOn(const sched::RequestProfile& profile, WorkerId worker) {
  CachedPrefix out;
  for (const sched::CacheView& v : profile.cache_views) {
    if (v.worker != worker) continue;
    out.blocks = v.depth_blocks;
    out.any_blocks = std::min<std::uint32_t>(
        std::max(v.any_depth_blocks, *std::max_element(v.depth_blocks.begin(), v.depth_blocks.end())),
        profile.num_full_blocks);
  }
  return out;
}

RoutedRequest BookingFor(const sched::RequestProfile& profile, const CachedPrefix& cached,
                         WorkerId worker, const sched::Decision* decision,
                         double wait_correction) {
  const std::uint64_t bs = std::max<std::uint32_t>(profile.block_size, 1);
  const std::uint64_t prompt = profile.prompt_tokens;
  const std::uint64_t cached_tokens = std::min<std::uint64_t>(cached.any_blocks * bs, prompt);
  RoutedRequest r;
  r.worker = worker;
  r.prompt_tokens = prompt;
  r.uncached_tokens = prompt - cached_tokens;
  r.kv_blocks = (prompt + profile.predicted_output_tokens + bs - 1) / bs;
  // What the tier learner needs to price this request's loads at Book (RoutedRequest).
  r.cached_blocks = cached.blocks;
  r.cached_any_blocks = cached.any_blocks;
  r.num_full_blocks = profile.num_full_blocks;
  r.block_size = static_cast<std::uint32_t>(bs);
  if (decision != nullptr) {
    if (const sched::CandidateTrace* c = decision->Find(worker)) {
      r.predicted_ttft_s = c->predicted_ttft_s;
      r.predicted_wait_s = c->predicted_wait_s;
      r.wait_correction = wait_correction;
    }
  }
  return r;
}

}  // namespace kvroute::fleet

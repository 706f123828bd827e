// Gateway::Parts' parity probes (parity_probe.h): at Start for every worker present, and for
// each worker that joins later (Gateway::JoinWorker → ParityProbeQueue → ProbeJoined), so a
// worker found by etcd or Kubernetes discovery is checked exactly as a static one is.
#include <spdlog/spdlog.h>

#include <chrono>
#include <thread>

#include "gateway/gateway_parts.h"

namespace kvroute::gateway {

ParityTarget Gateway::Parts::ParityTargetOf(const fleet::WorkerInfo& w) const {
  ParityTarget t{.id = w.id,
                 .name = w.spec.name,
                 .base_url = w.spec.base_url,
                 .model = w.spec.models.empty() ? "" : w.spec.models.front(),
                 .kv_events = feed && feed->Endpoint(w.id).has_value()};
  // The scraper's first round (before the probe) read its cache_config_info.
  if (auto m = router_state->Metrics(w.id); m && m->block_size && *m->block_size > 0) {
    t.block_size = *m->block_size;
  }
  return t;
}

ParityProbeDeps Gateway::Parts::ParityDeps() const {
  ParityProbeDeps deps{.tokenizer = tokenizer.get(),
                       .block_size = block_size,
                       .index = index.get(),
                       .timeout = std::chrono::milliseconds(
                           static_cast<std::int64_t>(config.parity_probe_timeout_s * 1000)),
                       // New per probe: a worker that leaves and rejoins with its cache
                       // warm must still store (and announce) the hash probe's prompt.
                       .nonce = static_cast<std::uint64_t>(clock.Now().count())};
  if (feed) {
    deps.event_batches = [this](WorkerId w) {
      auto c = feed->Counters(w);
      return c ? c->batches : 0;
    };
  }
  return deps;
}

// Before the first request: every worker's block size, tokenizer, chat template and keys.
void Gateway::Parts::RunParityProbe() {
  std::vector<ParityTarget> targets;
  for (const auto& w : router_state->List()) targets.push_back(ParityTargetOf(w));
  parity_watch.RunStartProbe(targets, ParityDeps());
}

void Gateway::Parts::ProbeJoined(const std::vector<WorkerId>& joined) {
  std::vector<WorkerId> ids;
  for (WorkerId id : joined) {
    if (!parity_watch.Probed(id) && router_state->Find(id)) ids.push_back(id);
  }
  if (ids.empty()) return;
  // The block-size check reads the worker's cache_config_info, which the scraper fetches on
  // its next round: wait for it, bounded (without it that check is skipped, not failed).
  const auto wait = std::max(std::chrono::milliseconds(2'000),
                             std::chrono::milliseconds(static_cast<std::int64_t>(
                                 config.scrape_interval_s * 3'000)));
  const auto deadline = std::chrono::steady_clock::now() + wait;
  auto all_scraped = [&] {
    for (WorkerId id : ids) {
      if (router_state->Find(id) && !router_state->Metrics(id)) return false;
    }
    return true;
  };
  while (!all_scraped() && std::chrono::steady_clock::now() < deadline && !stopped) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::vector<ParityTarget> targets;
  for (WorkerId id : ids) {
    if (auto info = router_state->Find(id)) targets.push_back(ParityTargetOf(*info));
  }
  if (targets.empty() || stopped) return;
  parity_watch.RunStartProbe(targets, ParityDeps());
  // A worker that left while it was probed: Leave dropped its gauges before the probe set
  // them again.
  std::lock_guard membership(membership_mu);
  for (const auto& t : targets) {
    if (!router_state->Find(t.id)) metrics.ForgetWorker(t.name);
  }
}

}  // namespace kvroute::gateway

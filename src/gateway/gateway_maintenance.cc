// Gateway::Parts between requests: the block size learned from the workers, the model
// catalog, the maintenance round (health, parity, metrics) and the metrics refresh. The
// rest of the gateway's life (create, start, drain, stop) is gateway.cc.
#include "gateway/gateway_parts.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "client/blocking_http_client.h"
#include "common/clock.h"
#include "gateway/admin.h"
#include "gateway/engine_metrics.h"
#include "gateway/etcd_discovery.h"
#include "gateway/membership.h"
#include "gateway/kv_feed.h"
#include "gateway/model_catalog.h"
#include "gateway/parity.h"
#include "gateway/parity_probe.h"
#include "gateway/parity_watch.h"
#include "gateway/proxy/proxy.h"
#include "gateway/replica_warm.h"
#include "gateway/pd_link_feed.h"
#include "gateway/request_pipeline.h"
#include "gateway/router_metrics.h"
#include "gateway/health_checker.h"
#include "fleet/router_state.h"
#include "kv/index/approx_predicted.h"
#include "kv/index/index.h"
#include "net/http_server.h"
#include "net/lane_pool.h"
#include "engine/engine.h"
#include "sched/registry.h"
#include "sched/tier_pricing.h"
#include "tokenize/hf_tokenizer.h"
#include "tokenize/simple_tokenizer.h"

namespace kvroute::gateway {
namespace {

std::chrono::milliseconds Ms(double seconds) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000));
}

}  // namespace

std::uint32_t Gateway::Parts::LearnBlockSize() {
  if (config.block_size > 0) return config.block_size;
  std::mutex m;
  std::map<std::uint32_t, int> seen;
  ScraperOptions opts;
  opts.timeout = std::chrono::milliseconds(2'000);
  std::vector<ScrapeTarget> targets;
  for (std::size_t i = 0; i < config.workers.size(); ++i) {
    targets.push_back({static_cast<WorkerId>(i), config.workers[i].url});
  }
  EngineMetricsScraper probe(
      opts, [targets] { return targets; },
      [&](WorkerId, std::expected<EngineMetrics, std::string> r) {
        if (r && r->block_size && *r->block_size > 0) {
          std::lock_guard lock(m);
          ++seen[*r->block_size];
        }
      },
      &clock);
  probe.RunOnce();
  if (seen.empty()) {
    spdlog::warn("block size: no worker reported cache_config_info; using {}",
                 kv::kDefaultBlockSize);
    return kv::kDefaultBlockSize;
  }
  const std::uint32_t chosen = std::max_element(seen.begin(), seen.end(), [](auto& a, auto& b) {
                                 return a.second < b.second;
                               })->first;
  if (seen.size() > 1) {
    spdlog::warn("block size: workers disagree ({} sizes); using the most common, {}", seen.size(),
                 chosen);  // the parity probe names each worker that differs
  }
  return chosen;
}

void Gateway::Parts::RefreshCatalog(client::BlockingHttpClient& http) {
  for (const auto& w : router_state->List()) {
    auto req = client::MakeRequest("GET", w.spec.base_url + "/v1/models");
    if (!req) continue;
    req->timeouts = client::Timeouts{.connect = std::chrono::milliseconds(1'000),
                                     .first_byte = std::chrono::milliseconds(2'000),
                                     .idle = std::chrono::milliseconds(2'000),
                                     .total = std::chrono::milliseconds(3'000)};
    auto res = http.Send(std::move(*req));
    if (!res || res->status != 200) continue;
    auto cards = ParseModelList(res->body);
    if (cards) catalog.Update(w.id, std::move(*cards));
  }
}

ParityIndexView Gateway::Parts::IndexView() const {
  ParityIndexView v;
  if (!index) return v;
  kv::IndexCounters c = index->counters();
  v.keyer_block_size = index->keyer().block_size();
  v.last_event_block_size = c.last_event_block_size;
  v.batches = c.batches;
  v.blocks_stored = c.blocks_stored;
  return v;
}

void Gateway::Parts::Maintain() {
  client::BlockingHttpClient http;
  auto last_catalog = std::chrono::steady_clock::now();
  const auto catalog_every =
      std::max(Ms(config.scrape_interval_s) * 5, std::chrono::milliseconds(2'000));
  std::unique_lock lock(mu);
  while (!stop) {
    cv.wait_for(lock, std::chrono::milliseconds(500));
    if (stop) break;
    lock.unlock();
    const Nanos now = clock.Now();
    if (std::chrono::steady_clock::now() - last_catalog >= catalog_every) {
      RefreshCatalog(http);
      last_catalog = std::chrono::steady_clock::now();
    }
    predicted->Expire(now);
    for (const auto& w : router_state->List()) {  // continuously: the scraped block size
      if (auto m = router_state->Metrics(w.id); m && m->block_size) {
        parity_watch.WatchBlockSize(w.id, w.spec.name, *m->block_size, block_size);
      }
    }
    if (parity && index) {
      auto lookup = [this](WorkerId worker, std::span<const kv::BlockKey> keys) -> std::uint32_t {
        for (const auto& m : index->Lookup(keys)) {
          if (m.worker == worker) return m.any_depth;
        }
        return 0;
      };
      // A worker's own evidence: its feed's batches, stored blocks and block size.
      const std::uint32_t keyer_block_size = index->keyer().block_size();
      auto worker_view = [this, keyer_block_size](WorkerId w) {
        ParityIndexView v{.keyer_block_size = keyer_block_size};
        if (auto c = feed ? feed->Counters(w) : std::nullopt) {
          v.last_event_block_size = c->last_block_size;
          v.batches = c->batches;
          v.blocks_stored = c->blocks_stored;
        }
        return v;
      };
      ParityReport report = parity->CheckAll(now, lookup, IndexView(), worker_view);
      if (report.global) spdlog::warn("parity: {}", report.global->message);
      for (const auto& w : report.workers) {
        const std::optional<std::string> name = NameOf(*w.worker);
        spdlog::warn("parity: worker {}: {}", name ? *name : "?", w.message);
        if (!name) continue;
        if (w.cause == ParityCause::kBlockSizeMismatch) {
          parity_watch.Set(*w.worker, *name, "block_size", true);
        } else if (w.cause == ParityCause::kNoEvents) {
          parity_watch.Set(*w.worker, *name, "kv_events", true);
        } else if (w.cause == ParityCause::kTokenizerMismatch) {
          parity_watch.Set(*w.worker, *name, "tokenizer", true);
        }
      }
    }
    lock.lock();
  }
}

void Gateway::Parts::RefreshMetrics() {
  const Nanos now = clock.Now();
  // Not while a worker joins or leaves: Leave drops a worker's gauges, and a refresh that had
  // listed it before would set them again, for a worker that is gone.
  std::lock_guard membership(membership_mu);
  for (const auto& w : router_state->List()) {
    fleet::HealthStatus h = router_state->health().Status(w.id, now);
    metrics.SetWorkerState(w.spec.name, h.Routable(), h.draining,
                           router_state->load().Load(w.id).inflight_requests);
    metrics.SetTtftCalibration(w.spec.name, router_state->load().WaitCorrection(w.id, now),
                               router_state->load().Calibration(w.id).drift);
    if (auto link = router_state->Link(w.id); link && link->samples() > 0) {
      metrics.SetKvLink(w.spec.name, link->lane_bytes_per_s().value_or(0), link->samples());
    }
    if (auto tiers = router_state->TierLoads(w.id)) {
      for (Tier t : {Tier::kCpu, Tier::kDisk, Tier::kShared}) {
        if (auto bw = tiers->bytes_per_s(t)) {
          metrics.SetTierLoad(w.spec.name, kv::TierName(t), *bw,
                              static_cast<double>(tiers->samples(t)));
        }
      }
    }
  }
  if (index) {
    kv::IndexStats s = index->stats();
    metrics.SetIndex(static_cast<double>(s.nodes), static_cast<double>(s.entries),
                     static_cast<double>(predicted->size()));
  } else {
    metrics.SetIndex(0, 0, static_cast<double>(predicted->size()));
  }
  if (feed) {
    for (const auto& [id, c] : feed->AllCounters()) {
      if (auto name = NameOf(id)) metrics.SetEventLag(*name, c.last_lag_s);
    }
  }
  if (deltas_in && remote) {
    const RemoteBookingCounters r = remote->Counters();
    metrics.SetReplicas(static_cast<double>(deltas_in->peers()), static_cast<double>(r.held),
                        r.deltas, r.expired, r.unknown_worker);
  }
  if (discovery) {
    EtcdDiscoveryStatus d = discovery->status();
    metrics.SetDiscovery(d.watch.connected, d.watch.failures, d.malformed,
                         static_cast<double>(d.workers));
  }
  if (parity) {
    metrics.SetParity("all", parity->counters().ratio());
    for (const auto& [id, c] : parity->WorkerCounters()) {
      if (auto name = NameOf(id)) metrics.SetParity(*name, c.ratio());
    }
  }
}

}  // namespace kvroute::gateway

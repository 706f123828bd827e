// Gateway::JoinWorker / DrainWorker / LeaveWorker: workers entering and leaving the running
// gateway. Static workers enter by the same Parts::Join at Start, so every path that knows a
// worker (router state, KV feed, catalog, names for metrics; the health checker and scraper
// read the table each round) is set up in one place and torn down in one place.
#include <spdlog/spdlog.h>

#include "client/client_types.h"
#include "gateway/gateway.h"
#include "gateway/gateway_parts.h"
#include "gateway/membership.h"
#include "engine/engine.h"  // EngineConfig: the shared tier's default bandwidth

namespace kvroute::gateway {
namespace {

sched::Role RoleOf(const std::string& role) {
  if (role == "prefill") return sched::Role::kPrefill;
  if (role == "decode") return sched::Role::kDecode;
  return sched::Role::kMixed;
}

}  // namespace

fleet::WorkerSpec SpecFromConfig(const WorkerConfig& w, std::uint32_t block_size) {
  fleet::WorkerSpec spec;
  spec.name = w.name;
  spec.base_url = w.url;
  spec.models = w.models;
  spec.role = RoleOf(w.role);
  spec.labels = w.labels;
  spec.profile = w.profile;
  spec.profile_speedup = w.profile_speedup;
  spec.block_size = block_size;
  if (w.cpu_load_bytes_per_s > 0) {
    spec.tier_load_bytes_per_s[static_cast<int>(kv::Tier::kCpu)] = w.cpu_load_bytes_per_s;
  }
  spec.kv_events = {w.kv_events.endpoint, w.kv_events.replay_endpoint, w.kv_events.topic};
  return spec;
}

fleet::WorkerSpec SpecFromRecord(const etcd::WorkerRecord& r, std::uint32_t block_size) {
  fleet::WorkerSpec spec;
  spec.name = r.name;
  spec.base_url = r.url;
  spec.models = r.models;
  spec.role = RoleOf(r.role);
  spec.labels = {{"discovery", "etcd"}};
  spec.profile = r.profile;
  spec.profile_speedup = r.profile_speedup;
  spec.block_size = block_size;
  spec.kv_events = {r.kv_events_endpoint, r.kv_events_replay_endpoint, r.kv_events_topic};
  // P/D: what a static worker's tp, gpus, link, link_* keys say (0 / empty: the profile's).
  spec.tp = r.tp;
  spec.gpus = r.gpus;
  spec.link = r.link;
  spec.link_bytes_per_s = r.link_bytes_per_s;
  spec.link_latency_s = r.link_latency_s;
  return spec;
}

std::expected<WorkerId, std::string> Gateway::Parts::Join(fleet::WorkerSpec spec) {
  std::lock_guard membership(membership_mu);
  auto& shared = spec.tier_load_bytes_per_s[static_cast<int>(kv::Tier::kShared)];
  if (config.kv_store && !shared) {
    // The shared store's blocks load at the store's bandwidth, the same on every worker.
    shared = config.kv_store->load_bytes_per_s > 0
                 ? config.kv_store->load_bytes_per_s
                 : engine::EngineConfig{}.shared.read_bytes_per_s * spec.profile_speedup;
  }
  auto url = client::ParseUrl(spec.base_url);
  if (!url) return std::unexpected("url: " + url.error());
  if (router_state->FindByName(spec.name)) {
    return std::unexpected("name: '" + spec.name + "' is already in the fleet");
  }
  const fleet::KvEventSource events = spec.kv_events;
  const std::string name = spec.name;
  const std::vector<std::string> models = spec.models;
  auto id = router_state->Add(std::move(spec), clock.Now());  // validates; seeds the rates
  if (!id) return std::unexpected(id.error());
  if (feed && !events.endpoint.empty()) {
    // The worker's blocks as a sibling replica's index has them (replica_warm.h), merged under
    // this id before its own events can arrive: a merge never overwrites live events.
    if (warm) warm->MergeWorker(name, *id, *index);
    // A late subscriber asks the engine's replay socket for what it missed at the first
    // batch it sees (kv/wire/zmq_subscriber.h), so a worker joining with a warm cache is warmed;
    // after a merge it asks only for what follows the image's sequence (KvIndex::AppliedSeq).
    auto ok = feed->AddWorker(*id, KvEventSpec{events.endpoint, events.replay_endpoint,
                                                events.topic},
                              url->host);
    if (!ok) {
      index->RemoveWorker(*id);  // what the merge added
      router_state->Remove(*id);
      return std::unexpected("kv_events: " + ok.error());
    }
  }
  catalog.SetConfigured(*id, models);
  {
    std::lock_guard lock(names_mu);
    names[*id] = name;
  }
  return *id;
}

bool Gateway::Parts::Leave(WorkerId id) {
  std::lock_guard membership(membership_mu);
  auto info = router_state->Find(id);
  if (!info) return false;
  // Events first: nothing may re-add the worker's blocks to the index after it left.
  if (feed) feed->RemoveWorker(id);
  // In-flight requests keep their upstream connections and finish (or fail) as they would;
  // their later booking calls find no booking and change nothing (fleet/README.md).
  router_state->Remove(id);
  if (predicted) predicted->RemoveWorker(id);
  catalog.Remove(id);
  metrics.ForgetWorker(info->spec.name);
  std::lock_guard lock(names_mu);
  names.erase(id);
  return true;
}

std::expected<void, std::string> Gateway::JoinWorker(fleet::WorkerSpec spec) {
  Parts& p = *parts_;
  if (!p.router_state) return std::unexpected("the gateway is not started");
  if (p.stopped) return std::unexpected("the gateway is stopping");
  const std::string name = spec.name;
  auto id = p.Join(std::move(spec));
  if (!id) return std::unexpected(id.error());
  spdlog::info("worker {} joined (id {})", name, *id);
  // The same parity probe a static worker gets at Start, off this (discovery's) thread.
  if (p.join_probes) p.join_probes->Enqueue(*id);
  return {};
}

bool Gateway::DrainWorker(std::string_view name) {
  Parts& p = *parts_;
  if (!p.router_state) return false;
  auto id = p.router_state->FindByName(name);
  if (!id) return false;
  p.router_state->health().SetDraining(*id, true);
  spdlog::info("worker {} draining: no new requests", name);
  return true;
}

bool Gateway::LeaveWorker(std::string_view name) {
  Parts& p = *parts_;
  if (!p.router_state) return false;
  auto id = p.router_state->FindByName(name);
  if (!id || !p.Leave(*id)) return false;
  spdlog::info("worker {} left", name);
  return true;
}

}  // namespace kvroute::gateway

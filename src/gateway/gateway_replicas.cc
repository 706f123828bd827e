// Gateway::Parts' steps of the replica delta stream (docs/replicas.md): the subscriptions to
// every sibling at start, and the end of this replica's own streams at drain.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <thread>

#include "gateway/gateway_parts.h"

namespace kvroute::gateway {

std::expected<void, std::string> Gateway::Parts::StartDeltaSubscribers(
    const std::string& own_url) {
  if (!deltas_out) return {};
  const GatewayConfig& c = config;
  remote = std::make_unique<RemoteBookings>(router_state.get(), predicted.get(),
                                            FromSeconds(c.replicas.remote_booking_ttl_s));
  if (!c.replicas.etcd_prefix.empty()) {
    auto lister = ReplicaRegistry::Create(c.etcd.endpoints, c.replicas.etcd_prefix);
    if (!lister) return std::unexpected(lister.error());
    sibling_lister = std::move(*lister);
  }
  DeltaSubscriberOptions o;
  o.own_instance = deltas_out->instance();
  o.api_key = c.api_keys.empty() ? "" : c.api_keys.front();
  // The static list, then etcd's; while etcd does not answer, its last answer stands (a
  // sibling's stream that breaks meanwhile is still retried).
  auto last_etcd = std::make_shared<std::vector<std::string>>();
  o.list = [this, own_url, last_etcd] {
    std::vector<std::string> urls;
    auto add = [&](const std::string& u) {
      if (u != own_url && std::find(urls.begin(), urls.end(), u) == urls.end()) {
        urls.push_back(u);
      }
    };
    for (const auto& u : config.replicas.warm_from) add(u);
    if (sibling_lister) {
      if (auto listed = sibling_lister->TryList()) *last_etcd = std::move(*listed);
      for (const auto& u : *last_etcd) add(u);
    }
    return urls;
  };
  deltas_in = std::make_unique<DeltaSubscribers>(std::move(o), remote.get(), &clock);
  deltas_in->Start();
  spdlog::info("replicas: sharing bookings with siblings (instance {:016x})",
               deltas_out->instance());
  return {};
}

std::chrono::milliseconds Gateway::Parts::DrainDeltaStreams(std::chrono::milliseconds budget) {
  if (!deltas_out || !server) return std::chrono::milliseconds(0);
  const auto start = std::chrono::steady_clock::now();
  server->StopAccepting();
  // The siblings' streams are requests in flight too; the others are this replica's own.
  while (server->InFlight() > deltas_out->subscribers() &&
         std::chrono::steady_clock::now() - start < budget) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  deltas_out->Stop();
  return std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
}

}  // namespace kvroute::gateway

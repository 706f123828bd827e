#include "sim/sim_registration.h"

#include <spdlog/spdlog.h>

#include <thread>

#include "engine/profile.h"
#include "etcd/client.h"
#include "etcd/registration.h"
#include "sim/kv_transfer_config.h"
#include "sim/sim_server.h"

namespace kvroute::sim {

etcd::WorkerRecord SimWorkerRecord(const SimConfig& config, const SimServer& server,
                                   const SimEtcdOptions& options, std::uint32_t profile_tp) {
  etcd::WorkerRecord r;
  r.name = options.name.empty() ? "sim-" + std::to_string(server.port()) : options.name;
  if (!options.advertise_url.empty()) {
    r.url = options.advertise_url;
  } else {
    std::string host = config.host;
    if (host == "0.0.0.0" || host == "::" || host.empty()) host = "127.0.0.1";
    if (host.find(':') != std::string::npos) host = "[" + host + "]";
    r.url = "http://" + host + ":" + std::to_string(server.port());
  }
  r.models.push_back(server.served_model_name());
  for (const std::string& lora : config.lora_modules) {
    r.models.push_back(lora.substr(0, lora.find('=')));  // NAME=PATH or NAME
  }
  if (config.kv_transfer) {
    if (config.kv_transfer->role == KvRole::kProducer) r.role = "prefill";
    if (config.kv_transfer->role == KvRole::kConsumer) r.role = "decode";
  }
  r.tp = profile_tp;
  r.gpus = profile_tp;
  r.block_size = config.block_size;
  // vLLM's rule for the endpoint (kv/wire/zmq_subscriber.h): a '*' or '::' host means the engine
  // binds and the router connects to the URL's host. The bound address has the wildcard port
  // resolved and the host spelled out, so write it back in the engine-binds form.
  r.kv_events_endpoint = server.kv_events_endpoint();
  const std::string& configured = config.kv_events_endpoint;
  const bool binds = configured.find('*') != std::string::npos ||
                     configured.find("::") != std::string::npos;
  if (binds && !r.kv_events_endpoint.empty()) {
    const std::size_t colon = r.kv_events_endpoint.rfind(':');
    r.kv_events_endpoint = "tcp://*" + r.kv_events_endpoint.substr(colon);
  }
  r.kv_events_replay_endpoint = server.kv_events_replay_endpoint();
  r.kv_events_topic = config.kv_events_topic;
  r.profile = config.profile;
  r.profile_speedup = config.speedup;
  // The link this sim's decode legs pull over (--kv-link), so a router finds it in the record
  // as it would in a static worker's `link`; not said: the profile's first, on both sides.
  r.link = config.kv_link;
  return r;
}

std::expected<std::unique_ptr<SimRegistrar>, std::string> SimRegistrar::Create(
    SimEtcdOptions options, etcd::WorkerRecord record) {
  auto endpoints = etcd::ParseEndpoints(options.endpoints);
  if (!endpoints) return std::unexpected("--etcd: " + endpoints.error());
  if (options.prefix.empty()) return std::unexpected("--etcd-prefix: must not be empty");
  if (options.ttl_s < 2) return std::unexpected("--etcd-ttl: must be >= 2 seconds");
  if (options.drain_delay_s < 0) return std::unexpected("--etcd-drain-delay: must be >= 0");
  std::unique_ptr<SimRegistrar> r(new SimRegistrar());
  r->key_ = options.prefix + record.name;
  r->options_ = std::move(options);
  r->record_ = std::move(record);
  r->client_ = std::make_unique<etcd::EtcdClient>(etcd::ClientOptions{.endpoints = *endpoints});
  r->registration_ = std::make_unique<etcd::Registration>(
      r->client_.get(), etcd::RegistrationOptions{.key = r->key_, .ttl_s = r->options_.ttl_s},
      etcd::ToJson(r->record_));
  return r;
}

SimRegistrar::~SimRegistrar() = default;

void SimRegistrar::Start() { (void)registration_->Start(); }

void SimRegistrar::SetDraining() {
  record_.draining = true;
  if (auto ok = registration_->Update(etcd::ToJson(record_)); !ok) {
    spdlog::warn("etcd: could not mark {} draining: {}", key_, ok.error().text);
  } else {
    spdlog::info("etcd: {} marked draining; stopping in {} s", key_, options_.drain_delay_s);
  }
  std::this_thread::sleep_for(
      std::chrono::milliseconds(static_cast<std::int64_t>(options_.drain_delay_s * 1000)));
}

void SimRegistrar::Stop() { registration_->Stop(/*revoke=*/true); }

}  // namespace kvroute::sim

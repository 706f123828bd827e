#include "gateway/etcd_discovery.h"

#include <spdlog/spdlog.h>

#include "etcd/client.h"
#include "gateway/membership.h"

namespace kvroute::gateway {

std::expected<std::unique_ptr<EtcdDiscovery>, std::string> EtcdDiscovery::Create(
    EtcdDiscoveryOptions options, MembershipCalls calls) {
  std::string joined;
  for (const auto& e : options.endpoints) joined += (joined.empty() ? "" : ",") + e;
  auto endpoints = etcd::ParseEndpoints(joined);
  if (!endpoints) return std::unexpected("discovery.etcd.endpoints: " + endpoints.error());
  if (options.prefix.empty()) return std::unexpected("discovery.etcd.prefix: must not be empty");
  std::unique_ptr<EtcdDiscovery> d(new EtcdDiscovery());
  d->options_ = std::move(options);
  d->calls_ = std::move(calls);
  d->client_ = std::make_unique<etcd::EtcdClient>(etcd::ClientOptions{.endpoints = *endpoints});
  EtcdDiscovery* self = d.get();
  d->watcher_ = std::make_unique<etcd::PrefixWatcher>(
      d->client_.get(), etcd::WatcherOptions{.prefix = d->options_.prefix},
      [self](const etcd::KeyValue& kv) { self->OnPut(kv); },
      [self](const std::string& key) { self->OnDelete(key); });
  return d;
}

EtcdDiscovery::~EtcdDiscovery() { Stop(); }

void EtcdDiscovery::Start() {
  if (auto ok = watcher_->Start(); !ok) {
    spdlog::warn("etcd: cannot list {} at {}: {}; starting with the static workers only",
                 options_.prefix, client_->CurrentEndpoint(), ok.error().text);
  } else {
    spdlog::info("etcd: following {} at {} ({} workers)", options_.prefix,
                 client_->CurrentEndpoint(), status().workers);
  }
}

void EtcdDiscovery::Stop() {
  if (watcher_) watcher_->Stop();
}

// REQUIRES: called on the watcher's thread (one at a time), not under mu_.
void EtcdDiscovery::JoinFrom(const std::string& key, const etcd::WorkerRecord& record) {
  if (record.block_size != 0 && record.block_size != options_.block_size) {
    spdlog::warn("etcd: {}: worker {} has block_size {}, kvroute keys blocks of {}", key,
                 record.name, record.block_size, options_.block_size);
  }
  auto ok = calls_.join(SpecFromRecord(record, options_.block_size));
  std::lock_guard lock(mu_);
  Known& k = known_[key];
  k.record = record;
  k.joined = ok.has_value();
  if (!ok) {
    ++refused_;
    spdlog::warn("etcd: {}: worker {} not added: {}", key, record.name, ok.error());
    return;
  }
  if (record.draining) calls_.drain(record.name);
}

void EtcdDiscovery::OnPut(const etcd::KeyValue& kv) {
  auto record = etcd::ParseWorkerRecord(kv.value);
  std::optional<Known> old;
  {
    std::lock_guard lock(mu_);
    if (!record) {
      ++malformed_;
      spdlog::warn("etcd: skipping {}: {}", kv.key, record.error());
      return;
    }
    if (auto it = known_.find(kv.key); it != known_.end()) old = it->second;
  }
  if (!old) {
    JoinFrom(kv.key, *record);
    return;
  }
  if (old->joined && old->record == *record) return;
  etcd::WorkerRecord drained = old->record;
  drained.draining = true;
  if (old->joined && !old->record.draining && drained == *record) {
    calls_.drain(record->name);
    std::lock_guard lock(mu_);
    known_[kv.key].record = *record;
    return;
  }
  // Anything else (a new URL, models, undrained, a re-registration after a restart that
  // changed nothing but came as a new key version): a new incarnation of the worker.
  if (old->joined) calls_.leave(old->record.name);
  JoinFrom(kv.key, *record);
}

void EtcdDiscovery::OnDelete(const std::string& key) {
  std::optional<Known> old;
  {
    std::lock_guard lock(mu_);
    auto it = known_.find(key);
    if (it == known_.end()) return;
    old = it->second;
    known_.erase(it);
  }
  if (old->joined) calls_.leave(old->record.name);
}

EtcdDiscoveryStatus EtcdDiscovery::status() const {
  EtcdDiscoveryStatus s;
  s.watch = watcher_->status();
  std::lock_guard lock(mu_);
  s.malformed = malformed_;
  s.refused = refused_;
  for (const auto& [key, k] : known_) s.workers += k.joined ? 1 : 0;
  return s;
}

}  // namespace kvroute::gateway

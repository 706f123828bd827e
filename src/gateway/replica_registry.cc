#include "gateway/replica_registry.h"

#include <spdlog/spdlog.h>

#include <boost/json.hpp>

namespace kvroute::gateway {

std::string AdvertiseUrl(const std::string& configured, const std::string& host,
                         std::uint16_t port) {
  if (!configured.empty()) return configured;
  const std::string shown = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return "http://" + shown + ":" + std::to_string(port);
}

std::optional<std::string> ReplicaUrlOf(std::string_view value) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(value, ec);
  if (ec || !v.is_object()) return std::nullopt;
  const auto* url = v.as_object().if_contains("url");
  if (!url || !url->is_string() || !url->as_string().starts_with("http://")) return std::nullopt;
  return std::string(url->as_string());
}

std::expected<std::unique_ptr<ReplicaRegistry>, std::string> ReplicaRegistry::Create(
    const std::vector<std::string>& etcd_endpoints, std::string prefix) {
  std::string list;
  for (const auto& e : etcd_endpoints) list += (list.empty() ? "" : ",") + e;
  auto endpoints = etcd::ParseEndpoints(list);
  if (!endpoints) return std::unexpected("replicas.etcd_prefix: " + endpoints.error());
  etcd::ClientOptions o;
  o.endpoints = std::move(*endpoints);
  return std::unique_ptr<ReplicaRegistry>(
      new ReplicaRegistry(std::make_unique<etcd::EtcdClient>(std::move(o)), std::move(prefix)));
}

ReplicaRegistry::ReplicaRegistry(std::unique_ptr<etcd::EtcdClient> client, std::string prefix)
    : client_(std::move(client)), prefix_(std::move(prefix)) {}

ReplicaRegistry::~ReplicaRegistry() { Withdraw(); }

std::vector<std::string> ReplicaRegistry::Siblings() {
  auto listed = TryList();
  if (!listed) {
    spdlog::warn("replicas: {}; no siblings from etcd", listed.error());
    return {};
  }
  return std::move(*listed);
}

std::expected<std::vector<std::string>, std::string> ReplicaRegistry::TryList() {
  std::vector<std::string> out;
  auto range = client_->RangePrefix(prefix_);
  if (!range) {
    return std::unexpected("etcd " + client_->CurrentEndpoint() + ": cannot list " + prefix_ +
                           " (" + range.error().text + ")");
  }
  for (const auto& kv : range->kvs) {
    if (auto url = ReplicaUrlOf(kv.value)) {
      out.push_back(*url);
    } else {
      spdlog::warn("replicas: skipping {}: not {{\"url\": \"http://host:port\"}}", kv.key);
    }
  }
  return out;
}

void ReplicaRegistry::Register(const std::string& url) {
  if (registration_) return;
  const std::string key = prefix_ + url.substr(std::string_view("http://").size());
  registration_ = std::make_unique<etcd::Registration>(
      client_.get(), etcd::RegistrationOptions{.key = key},
      boost::json::serialize(boost::json::object{{"url", url}}));
  if (auto ok = registration_->Start(); !ok) {
    spdlog::warn("replicas: not registered in etcd yet ({}); retrying", ok.error().text);
  } else {
    spdlog::info("replicas: registered {} in etcd", key);
  }
}

void ReplicaRegistry::Withdraw() {
  if (!registration_) return;
  registration_->Stop(/*revoke=*/true);
  registration_.reset();
}

}  // namespace kvroute::gateway

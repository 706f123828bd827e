#include "etcd/registration.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace kvroute::etcd {

Registration::Registration(EtcdClient* client, RegistrationOptions options, std::string value)
    : client_(client), options_(std::move(options)), value_(std::move(value)) {}

Registration::~Registration() { Stop(false); }

Result<void> Registration::RegisterLocked() {
  std::string value;
  {
    std::lock_guard lock(mu_);
    value = value_;
  }
  auto lease = client_->GrantLease(options_.ttl_s);
  if (!lease) return std::unexpected(lease.error());
  auto put = client_->Put(options_.key, value, lease->id);
  if (!put) {
    (void)client_->RevokeLease(lease->id);  // best effort: it expires anyway
    return std::unexpected(put.error());
  }
  std::lock_guard lock(mu_);
  status_.registered = true;
  status_.lease = lease->id;
  ++status_.registrations;
  return {};
}

Result<void> Registration::Start() {
  Result<void> first;
  {
    std::lock_guard call(call_mu_);
    first = RegisterLocked();
  }
  if (first) {
    spdlog::info("etcd: registered {} (ttl {} s)", options_.key, options_.ttl_s);
  } else {
    std::lock_guard lock(mu_);
    ++status_.failures;
    status_.last_error = first.error().text;
    spdlog::warn("etcd: cannot register {} yet: {}; retrying", options_.key, first.error().text);
  }
  thread_ = std::thread([this] { Loop(); });
  return first;
}

Result<void> Registration::Update(std::string value) {
  std::lock_guard call(call_mu_);
  std::int64_t lease = 0;
  {
    std::lock_guard lock(mu_);
    value_ = value;
    if (!status_.registered) return {};  // the next registration puts it
    lease = status_.lease;
  }
  auto put = client_->Put(options_.key, value, lease);
  if (!put) {
    std::lock_guard lock(mu_);
    ++status_.failures;
    status_.last_error = put.error().text;
    if (put.error().kind == Error::Kind::kNotFound) status_.registered = false;
    return std::unexpected(put.error());
  }
  return {};
}

void Registration::Loop() {
  const auto interval =
      std::max(std::chrono::milliseconds(options_.ttl_s * 1000 / 3), std::chrono::milliseconds(100));
  std::chrono::milliseconds backoff{250};
  bool warned = false;
  std::unique_lock lock(mu_);
  for (;;) {
    const bool registered = status_.registered;
    cv_.wait_for(lock, registered ? interval : backoff, [this] { return stop_; });
    if (stop_) return;
    const std::int64_t lease = status_.lease;
    lock.unlock();
    Result<void> outcome;
    {
      std::lock_guard call(call_mu_);
      if (registered) {
        auto ttl = client_->KeepAliveOnce(lease);
        if (ttl && *ttl <= 0) {
          spdlog::warn("etcd: lease of {} is gone; registering again", options_.key);
          std::lock_guard l(mu_);
          status_.registered = false;
        } else if (!ttl) {
          if (ttl.error().kind == Error::Kind::kNotFound) {
            std::lock_guard l(mu_);
            status_.registered = false;
          }
          outcome = std::unexpected(ttl.error());
        }
        bool now_registered;
        {
          std::lock_guard l(mu_);
          now_registered = status_.registered;
        }
        if (!now_registered && outcome) outcome = RegisterLocked();
      } else {
        outcome = RegisterLocked();
      }
    }
    lock.lock();
    if (outcome) {
      if (warned) spdlog::info("etcd: {} registered again", options_.key);
      warned = false;
      backoff = std::chrono::milliseconds(250);
      continue;
    }
    ++status_.failures;
    status_.last_error = outcome.error().text;
    if (!warned) {
      spdlog::warn("etcd: {}: {}; retrying with backoff", options_.key, outcome.error().text);
      warned = true;
    }
    // A failed keepalive retries at the keepalive interval (the lease outlives two misses);
    // a failed registration backs off.
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

void Registration::Stop(bool revoke) {
  {
    std::lock_guard lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (!revoke) return;
  std::lock_guard call(call_mu_);
  std::int64_t lease = 0;
  {
    std::lock_guard lock(mu_);
    if (!status_.registered) return;
    lease = status_.lease;
    status_.registered = false;
  }
  if (auto ok = client_->RevokeLease(lease); !ok) {
    spdlog::warn("etcd: revoking the lease of {}: {} (it expires in {} s)", options_.key,
                 ok.error().text, options_.ttl_s);
  }
}

RegistrationStatus Registration::status() const {
  std::lock_guard lock(mu_);
  return status_;
}

}  // namespace kvroute::etcd

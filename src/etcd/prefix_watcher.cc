#include "etcd/prefix_watcher.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <condition_variable>
#include <set>

namespace kvroute::etcd {

PrefixWatcher::PrefixWatcher(EtcdClient* client, WatcherOptions options, PutFn on_put,
                             DeleteFn on_delete)
    : client_(client),
      options_(std::move(options)),
      on_put_(std::move(on_put)),
      on_delete_(std::move(on_delete)) {}

PrefixWatcher::~PrefixWatcher() { Stop(); }

void PrefixWatcher::Fail(const Error& error) {
  std::lock_guard lock(mu_);
  status_.connected = false;
  ++status_.failures;
  status_.last_error = error.text;
  if (!warned_) {
    spdlog::warn("etcd: watching {}: {}; keeping the last known workers, retrying with backoff",
                 options_.prefix, error.text);
    warned_ = true;
  }
}

Result<void> PrefixWatcher::List() {
  auto range = client_->RangePrefix(options_.prefix);
  if (!range) return std::unexpected(range.error());
  std::set<std::string> present;
  std::vector<const KeyValue*> changed;
  for (const KeyValue& kv : range->kvs) {
    present.insert(kv.key);
    auto it = known_.find(kv.key);
    if (it == known_.end() || it->second != kv.mod_revision) changed.push_back(&kv);
  }
  std::vector<std::string> gone;
  for (const auto& [key, rev] : known_) {
    if (!present.contains(key)) gone.push_back(key);
  }
  for (const std::string& key : gone) {
    known_.erase(key);
    on_delete_(key);
  }
  for (const KeyValue* kv : changed) {
    known_[kv->key] = kv->mod_revision;
    on_put_(*kv);
  }
  std::lock_guard lock(mu_);
  if (listed_) ++status_.relists;
  listed_ = true;
  status_.revision = range->revision;
  status_.connected = true;
  return {};
}

Result<void> PrefixWatcher::Start() {
  auto first = List();
  if (!first) Fail(first.error());
  thread_ = std::thread([this] { Loop(); });
  return first;
}

bool PrefixWatcher::Sleep(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  return !cv_.wait_for(lock, d, [this] { return stop_; });
}

// One watch stream, until it ends. Returns false when the next step must be a relist.
bool PrefixWatcher::WatchOnce() {
  std::int64_t from;
  {
    std::lock_guard lock(mu_);
    from = status_.revision + 1;
  }
  auto watch = client_->WatchPrefix(options_.prefix, from);
  if (!watch) {
    Fail(watch.error());
    return true;
  }
  {
    std::lock_guard lock(mu_);
    if (stop_) return true;
    current_ = watch->get();
  }
  bool relist = false;
  for (;;) {
    auto m = (*watch)->Next();
    if (!m) {
      bool stopping;
      {
        std::lock_guard lock(mu_);
        stopping = stop_;
      }
      if (!stopping && m.error().kind != Error::Kind::kIdle) Fail(m.error());
      break;
    }
    if (m->created) {
      std::lock_guard lock(mu_);
      status_.connected = true;
      if (warned_) spdlog::info("etcd: watching {} again from revision {}", options_.prefix, from);
      warned_ = false;
    }
    if (m->canceled) {
      if (m->compact_revision > 0) {
        spdlog::warn("etcd: revision {} of {} was compacted (now {}); listing again", from,
                     options_.prefix, m->compact_revision);
        relist = true;
      } else {
        Fail(Error{Error::Kind::kUnavailable, "watch canceled: " + m->cancel_reason});
      }
      break;
    }
    for (const WatchEvent& e : m->events) {
      if (e.type == WatchEvent::Type::kDelete) {
        if (known_.erase(e.kv.key) > 0) on_delete_(e.kv.key);
      } else {
        auto it = known_.find(e.kv.key);
        if (it == known_.end() || it->second != e.kv.mod_revision) {
          known_[e.kv.key] = e.kv.mod_revision;
          on_put_(e.kv);
        }
      }
      std::lock_guard lock(mu_);
      status_.revision = std::max(status_.revision, e.kv.mod_revision);
      ++status_.events;
    }
  }
  std::lock_guard lock(mu_);
  current_ = nullptr;
  return !relist;
}

void PrefixWatcher::Loop() {
  std::chrono::milliseconds backoff = options_.initial_backoff;
  bool need_list = !listed_;
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stop_) return;
    }
    std::uint64_t failures_before;
    {
      std::lock_guard lock(mu_);
      failures_before = status_.failures;
    }
    if (need_list) {
      auto ok = List();
      if (!ok) Fail(ok.error());
      need_list = !ok.has_value();
    }
    if (!need_list) need_list = !WatchOnce();
    bool failed;
    {
      std::lock_guard lock(mu_);
      failed = status_.failures != failures_before;
    }
    if (!failed) {
      backoff = options_.initial_backoff;
      continue;
    }
    if (!Sleep(backoff)) return;
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

void PrefixWatcher::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stop_) return;
    stop_ = true;
    if (current_ != nullptr) current_->Cancel();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

WatcherStatus PrefixWatcher::status() const {
  std::lock_guard lock(mu_);
  return status_;
}

}  // namespace kvroute::etcd

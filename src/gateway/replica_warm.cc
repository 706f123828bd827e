#include "gateway/replica_warm.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "client/blocking_http_client.h"
#include "gateway/replica_snapshot.h"
#include "sched/tier_pricing.h"

namespace kvroute::gateway {

std::optional<FetchedSnapshot> FetchSiblingSnapshot(const WarmOptions& o,
                                                    const kv::BlockKeyer& keyer) {
  if (o.siblings.empty()) return std::nullopt;
  client::ClientOptions copts;
  copts.max_body_bytes = std::size_t{1} << 30;  // a large fleet's index is far over 64 MiB
  client::BlockingHttpClient http(copts);
  for (const std::string& url : o.siblings) {
    auto req = client::MakeRequest("GET", url + "/admin/index/snapshot");
    if (!req) {
      spdlog::warn("replicas.warm_from: {}: {}", url, req.error());
      continue;
    }
    if (!o.api_key.empty()) req->headers.push_back({"Authorization", "Bearer " + o.api_key});
    req->timeouts = client::Timeouts{
        .connect = o.timeout, .first_byte = o.timeout, .idle = o.timeout, .total = o.timeout};
    auto res = http.Send(std::move(*req));
    if (!res) {
      spdlog::info("replicas.warm_from: {} did not answer ({})", url, res.error().text);
      continue;
    }
    if (res->status != 200) {
      spdlog::warn("replicas.warm_from: {} answered {}", url, res->status);
      continue;
    }
    auto envelope = DecodeSiblingSnapshot(res->body);
    if (!envelope) {
      spdlog::warn("replicas.warm_from: {}: {}", url, envelope.error());
      continue;
    }
    auto parsed = kv::IndexSnapshot::Parse(envelope->image, keyer);
    if (!parsed) {
      spdlog::warn("replicas.warm_from: {}: {}", url, parsed.error());
      continue;
    }
    FetchedSnapshot out{.sibling = url, .snapshot = std::move(*parsed),
                        .image_bytes = envelope->image.size()};
    for (const SnapshotWorker& w : envelope->workers) out.ids[w.name] = w.id;
    return out;
  }
  spdlog::warn("replicas.warm_from: no sibling gave an index snapshot; starting cold (the "
               "engines' KV events and their replay fill the index)");
  return std::nullopt;
}

KeptSiblingSnapshot::KeptSiblingSnapshot(FetchedSnapshot fetched, std::chrono::milliseconds keep)
    : sibling_(std::move(fetched.sibling)),
      keep_(keep),
      ids_(std::move(fetched.ids)),
      snapshot_(std::move(fetched.snapshot)) {
  counters_.kept = snapshot_.has_value();
}

KeptSiblingSnapshot::~KeptSiblingSnapshot() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (expiry_.joinable()) expiry_.join();
}

WarmMerge KeptSiblingSnapshot::MergeWorker(std::string_view name, WorkerId id,
                                           kv::KvIndex& index) {
  std::lock_guard lock(mu_);
  auto named = ids_.find(std::string(name));
  if (named == ids_.end()) return WarmMerge::kNotNamed;
  if (!snapshot_ || !merged_.insert(std::string(name)).second) {
    ++counters_.too_late;
    spdlog::info("replicas: worker {} is in {}'s snapshot, which is {}: it warms from its "
                 "engine's events", name, sibling_,
                 snapshot_ ? "used for it already" : "no longer kept (replicas.warm_keep_s)");
    return WarmMerge::kTooLate;
  }
  auto merged = index.RestoreWorker(*snapshot_, named->second, id);
  WarmMerge outcome = WarmMerge::kMerged;
  if (!merged) {
    ++counters_.refused;
    outcome = WarmMerge::kRefused;
    spdlog::warn("replicas: worker {} not warmed from {}'s snapshot: {}", name, sibling_,
                 merged.error());
  } else {
    ++counters_.merged_workers;
    counters_.merged_blocks += *merged;
    const std::optional<std::uint64_t> seq = snapshot_->applied_seq(named->second);
    if (seq) {
      ++counters_.with_seq;
      spdlog::info("replicas: worker {} (id {}) warmed from {}'s snapshot: {} block(s), its "
                   "events through seq {}; its subscriber resumes at {}", name, id, sibling_,
                   *merged, *seq, *seq + 1);
    } else {
      // A v1 image (a sibling of the release before) or a worker fed without sequences: the
      // first gap repair may replay batches the image already holds (their copies count twice).
      spdlog::info("replicas: worker {} (id {}) warmed from {}'s snapshot: {} block(s), no "
                   "event sequence (snapshot v{})", name, id, sibling_, *merged,
                   snapshot_->version());
    }
  }
  if (merged_.size() == ids_.size()) DropLocked();  // every worker it names was merged
  return outcome;
}

void KeptSiblingSnapshot::Arm() {
  std::lock_guard lock(mu_);
  if (!snapshot_ || expiry_.joinable()) return;
  if (keep_.count() <= 0) {
    DropLocked();
    return;
  }
  expiry_ = std::thread([this] { ExpireAfter(keep_); });
}

void KeptSiblingSnapshot::ExpireAfter(std::chrono::milliseconds keep) {
  std::unique_lock lock(mu_);
  const auto deadline = std::chrono::steady_clock::now() + keep;
  cv_.wait_until(lock, deadline, [this] { return stop_ || !snapshot_; });
  if (!stop_ && snapshot_) {
    spdlog::info("replicas: {}'s snapshot dropped after replicas.warm_keep_s ({} s); workers "
                 "joining from now warm from their engines' events", sibling_,
                 std::chrono::duration<double>(keep).count());
    DropLocked();
  }
}

void KeptSiblingSnapshot::DropLocked() {
  snapshot_.reset();
  counters_.kept = false;
  cv_.notify_all();
}

WarmCounters KeptSiblingSnapshot::counters() const {
  std::lock_guard lock(mu_);
  return counters_;
}

std::unique_ptr<KeptSiblingSnapshot> WarmIndexBeforeJoins(
    const GatewayConfig& c, const std::vector<std::string>& more_siblings, kv::KvIndex& index) {
  std::vector<std::string> siblings = c.replicas.warm_from;
  for (const auto& s : more_siblings) {
    if (std::find(siblings.begin(), siblings.end(), s) == siblings.end()) siblings.push_back(s);
  }
  if (siblings.empty()) return nullptr;
  WarmOptions o{.siblings = std::move(siblings),
                .api_key = c.api_keys.empty() ? "" : c.api_keys.front(),
                .timeout = std::chrono::milliseconds(
                    static_cast<std::int64_t>(c.replicas.warm_timeout_s * 1000))};
  const auto started = std::chrono::steady_clock::now();
  auto fetched = FetchSiblingSnapshot(o, index.keyer());
  if (!fetched) return nullptr;
  const std::size_t named = fetched->ids.size();
  const std::size_t bytes = fetched->image_bytes;
  auto kept = std::make_unique<KeptSiblingSnapshot>(
      std::move(*fetched),
      std::chrono::milliseconds(static_cast<std::int64_t>(c.replicas.warm_keep_s * 1000)));
  // The shared store is no worker and never joins: its blocks go in now, before its feed
  // starts (Gateway::Start subscribes to it after the workers).
  if (c.kv_store) {
    kept->MergeWorker(kSharedStoreSnapshotName, sched::kSharedStoreWorker, index);
  }
  spdlog::info("replicas: index warmed from {} in {} ms: {} worker(s) named, {} bytes; each "
               "merges as it joins (kept {} s after start)",
               kept->sibling(),
               std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - started)
                   .count(),
               named, bytes, c.replicas.warm_keep_s);
  return kept;
}

}  // namespace kvroute::gateway

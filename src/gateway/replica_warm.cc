#include "gateway/replica_warm.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "client/blocking_http_client.h"
#include "gateway/replica_snapshot.h"
#include "sched/tier_pricing.h"

namespace kvroute::gateway {

std::optional<WarmResult> WarmIndexFromSiblings(const WarmOptions& o, kv::KvIndex& index) {
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
    auto snapshot = DecodeSiblingSnapshot(res->body);
    if (!snapshot) {
      spdlog::warn("replicas.warm_from: {}: {}", url, snapshot.error());
      continue;
    }
    std::map<WorkerId, WorkerId> ids;
    for (const SnapshotWorker& w : snapshot->workers) {
      if (auto it = o.our_ids.find(w.name); it != o.our_ids.end()) ids[w.id] = it->second;
    }
    auto image = RemapSnapshotWorkers(snapshot->image, ids);
    if (!image) {
      spdlog::warn("replicas.warm_from: {}: {}", url, image.error());
      continue;
    }
    if (auto ok = index.Restore(*image); !ok) {
      spdlog::warn("replicas.warm_from: {}: {}", url, ok.error());
      continue;
    }
    return WarmResult{.sibling = url, .workers = ids.size(), .image_bytes = image->size()};
  }
  spdlog::warn("replicas.warm_from: no sibling gave an index snapshot; starting cold (the "
               "engines' KV events and their replay fill the index)");
  return std::nullopt;
}

void WarmIndexBeforeJoins(const GatewayConfig& c, const std::vector<std::string>& more_siblings,
                          kv::KvIndex& index) {
  std::vector<std::string> siblings = c.replicas.warm_from;
  for (const auto& s : more_siblings) {
    if (std::find(siblings.begin(), siblings.end(), s) == siblings.end()) siblings.push_back(s);
  }
  if (siblings.empty()) return;
  WarmOptions o{.siblings = std::move(siblings),
                .api_key = c.api_keys.empty() ? "" : c.api_keys.front(),
                .timeout = std::chrono::milliseconds(
                    static_cast<std::int64_t>(c.replicas.warm_timeout_s * 1000))};
  for (std::size_t i = 0; i < c.workers.size(); ++i) {
    o.our_ids[c.workers[i].name] = static_cast<WorkerId>(i);
  }
  if (c.kv_store) o.our_ids[std::string(kSharedStoreSnapshotName)] = sched::kSharedStoreWorker;
  const auto started = std::chrono::steady_clock::now();
  if (auto warm = WarmIndexFromSiblings(o, index)) {
    const kv::IndexStats s = index.stats();
    spdlog::info("replicas: index warmed from {} in {} ms: {} worker(s), {} bytes, {} entries",
                 warm->sibling,
                 std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::steady_clock::now() - started)
                     .count(),
                 warm->workers, warm->image_bytes, s.entries);
  }
}

}  // namespace kvroute::gateway

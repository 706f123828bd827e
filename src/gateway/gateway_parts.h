// Gateway::Parts: every component `kvroute serve` owns, shared by gateway.cc (build, start,
// stop) and membership.cc (workers joining and leaving at run time). Private to those files.
//
// Thread safety: the components are thread-safe as their headers say; `names` is guarded by
// `names_mu`; joins and leaves hold `membership_mu`; the rest is written only by Start/Stop.
#pragma once

#include <atomic>
#include <condition_variable>
#include <expected>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "gateway/config.h"
#include "gateway/engine_metrics.h"
#include "gateway/etcd_discovery.h"
#include "k8s/pool_watcher.h"
#include "gateway/gateway.h"
#include "gateway/health_checker.h"
#include "gateway/kv_feed.h"
#include "gateway/model_catalog.h"
#include "gateway/parity.h"
#include "gateway/parity_probe.h"
#include "gateway/parity_probe_queue.h"
#include "gateway/replica_delta_publisher.h"
#include "gateway/replica_delta_subscriber.h"
#include "gateway/replica_registry.h"
#include "gateway/replica_remote_bookings.h"
#include "gateway/replica_warm.h"
#include "gateway/parity_watch.h"
#include "gateway/proxy/proxy.h"
#include "gateway/request_pipeline.h"
#include "gateway/router_metrics.h"
#include "fleet/router_state.h"
#include "kv/index/approx_predicted.h"
#include "kv/index/index.h"
#include "net/http_server.h"
#include "net/lane_pool.h"
#include "tokenize/tokenizer.h"

namespace kvroute::client {
class BlockingHttpClient;
}

namespace kvroute::gateway {

struct Gateway::Parts {
  GatewayConfig config;
  std::shared_ptr<const sched::Policy> policy;
  tokenize::TokenizerPtr tokenizer;
  SteadyClock clock;
  RouterMetrics metrics;
  ModelCatalog catalog;
  std::atomic<bool> draining{false};
  std::uint32_t block_size = kv::kDefaultBlockSize;

  std::unique_ptr<fleet::RouterState> router_state;
  std::unique_ptr<kv::KvIndex> index;
  std::unique_ptr<kv::PredictedBlocks> predicted;
  std::unique_ptr<KvFeed> feed;
  std::unique_ptr<ParityChecker> parity;
  std::unique_ptr<EngineMetricsScraper> scraper;
  std::unique_ptr<HealthChecker> health;
  std::unique_ptr<RequestPipeline> pipeline;
  // The server's and the proxy's lanes (threads): a request's client connection and its
  // upstream exchange share one, so relayed chunks stay on one thread. Declared before both:
  // destroyed after them (their sockets live on its io_contexts).
  std::shared_ptr<net::LanePool> lanes;
  std::unique_ptr<Proxy> proxy;
  std::unique_ptr<net::HttpServer> server;
  // The booking delta stream (replicas.share_bookings with siblings; docs/replicas.md): this
  // replica's bookings out (the router state's listener, GET /admin/replica/deltas), the
  // siblings' in (one stream each, applied by `remote`); null without it. `sibling_lister`
  // is a registry client of its own for the subscribers' thread (ReplicaRegistry has one
  // caller at a time).
  std::unique_ptr<DeltaPublisher> deltas_out;
  std::unique_ptr<RemoteBookings> remote;
  std::unique_ptr<ReplicaRegistry> sibling_lister;
  std::unique_ptr<DeltaSubscribers> deltas_in;
  // Start's step once the server listens (gateway_replicas.cc): the remote bookings and one
  // subscription per sibling (warm_from, etcd_prefix), this replica's `own_url` left out.
  std::expected<void, std::string> StartDeltaSubscribers(const std::string& own_url);
  // Drain's step: stops accepting, waits (within `budget`) until only the siblings' delta
  // streams are in flight, then ends them; returns the time it took.
  std::chrono::milliseconds DrainDeltaStreams(std::chrono::milliseconds budget);
  // Worker names by id, for logs and metric labels of components that know only ids.
  mutable std::mutex names_mu;
  std::map<WorkerId, std::string> names;  // guarded by names_mu
  std::optional<std::string> NameOf(WorkerId id) const {
    std::lock_guard lock(names_mu);
    auto it = names.find(id);
    if (it == names.end()) return std::nullopt;
    return it->second;
  }
  // Discovery (etcd) feeding JoinWorker/DrainWorker/LeaveWorker; null without --etcd.
  std::unique_ptr<EtcdDiscovery> discovery;
  // InferencePool discovery (discovery.kubernetes): the watcher and the sink it calls (which
  // forwards to JoinWorker/DrainWorker/LeaveWorker); null without it.
  std::unique_ptr<k8s::MembershipSink> pool_sink;
  std::unique_ptr<k8s::PoolWatcher> pool_watcher;
  // A sibling's index snapshot, fetched at Start and kept for joins (replica_warm.h): Join
  // merges each worker it names before the worker's KV subscriber starts; null without
  // siblings, or when none answered.
  std::unique_ptr<KeptSiblingSnapshot> warm;
  // This replica's key in etcd for its siblings (replicas.etcd_prefix); null without it.
  std::unique_ptr<ReplicaRegistry> replica_registry;
  // Drain revokes the key on this thread (an etcd call, up to its 3 s timeout), so the
  // shutdown timeline does not wait for etcd; Stop joins it.
  std::thread replica_withdraw;
  // Serialises joins and leaves (the table, the feed, the catalog and `names` change together).
  std::mutex membership_mu;
  // membership.cc: the one path a worker enters by, static (Start) or discovered.
  std::expected<WorkerId, std::string> Join(fleet::WorkerSpec spec);
  bool Leave(WorkerId id);
  ParityWatch parity_watch{&metrics};  // kvroute_parity_mismatch and its warnings

  // Maintenance thread: model catalog, parity check, prediction expiry.
  std::thread maintenance;
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;  // guarded by mu
  std::atomic<bool> stopped{false};  // read by membership calls from discovery threads

  std::uint32_t LearnBlockSize();
  void RefreshCatalog(client::BlockingHttpClient& http);
  void Maintain();
  void RefreshMetrics();
  ParityIndexView IndexView() const;
  // parity_probe_gateway.cc: the start probe, and the same probe for workers joining later.
  ParityTarget ParityTargetOf(const fleet::WorkerInfo& worker) const;
  ParityProbeDeps ParityDeps() const;
  void RunParityProbe();
  void ProbeJoined(const std::vector<WorkerId>& joined);
  // Workers joining after Start, waiting for their probe; null when parity_probe is off.
  // Stopped before the parts its probes read.
  std::unique_ptr<ParityProbeQueue> join_probes;
};

}  // namespace kvroute::gateway

#include "gateway/gateway.h"
#include "gateway/gateway_parts.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "client/blocking_http_client.h"
#include "common/clock.h"
#include "gateway/admin.h"
#include "gateway/engine_metrics.h"
#include "gateway/etcd_discovery.h"
#include "gateway/membership.h"
#include "gateway/kv_feed.h"
#include "gateway/model_catalog.h"
#include "gateway/parity.h"
#include "gateway/parity_probe.h"
#include "gateway/parity_watch.h"
#include "gateway/proxy/proxy.h"
#include "gateway/replica_warm.h"
#include "gateway/pd_link_feed.h"
#include "gateway/request_pipeline.h"
#include "gateway/router_metrics.h"
#include "gateway/health_checker.h"
#include "fleet/router_state.h"
#include "kv/index/approx_predicted.h"
#include "kv/index/index.h"
#include "net/http_server.h"
#include "net/lane_pool.h"
#include "engine/engine.h"
#include "sched/registry.h"
#include "sched/tier_pricing.h"
#include "tokenize/hf_tokenizer.h"
#include "tokenize/simple_tokenizer.h"

namespace kvroute::gateway {
namespace {

std::chrono::milliseconds Ms(double seconds) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000));
}

}  // namespace


Gateway::Gateway(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}

Gateway::~Gateway() { Stop(); }

std::expected<std::unique_ptr<Gateway>, std::string> Gateway::Create(GatewayConfig config) {
  if (auto ok = Validate(config); !ok) return std::unexpected(ok.error());
  auto parts = std::make_unique<Parts>();
  auto policy = sched::Registry::Builtin().ParsePolicy(config.policy_yaml);
  if (!policy) return std::unexpected("scheduler.policy." + policy.error().message);
  parts->policy = *policy;
  if (config.mode == RoutingMode::kPrecise) {
    if (config.tokenizer.kind == "hf") {
      auto tok = tokenize::LoadHfTokenizer(config.tokenizer.model_dir);
      if (!tok) return std::unexpected("tokenizer.model_dir: " + tok.error());
      parts->tokenizer = *tok;
    } else {
      parts->tokenizer = std::make_shared<tokenize::SimpleTokenizer>();
    }
  }
  parts->config = std::move(config);
  return std::unique_ptr<Gateway>(new Gateway(std::move(parts)));
}

std::expected<void, std::string> Gateway::Start() {
  Parts& p = *parts_;
  const GatewayConfig& c = p.config;
  p.block_size = p.LearnBlockSize();
  spdlog::info("block size {} tokens; mode {}; policy {}; failure_mode {}", p.block_size,
               RoutingModeName(c.mode), p.policy->name(), FailureModeName(c.failure_mode));

  fleet::RouterStateOptions ropts;
  p.router_state = std::make_unique<fleet::RouterState>(ropts);
  kv::PredictedOptions popts;
  popts.ttl = FromSeconds(c.mode == RoutingMode::kPrecise ? c.predicted_ttl_s : c.approx_ttl_s);
  p.predicted = std::make_unique<kv::PredictedBlocks>(popts);
  if (c.mode == RoutingMode::kPrecise) {
    p.index = std::make_unique<kv::KvIndex>(kv::BlockKeyer(p.block_size));
    p.feed = std::make_unique<KvFeed>(p.index.get());
    p.parity = std::make_unique<ParityChecker>(ParityOptions{}, p.IndexView());
  }

  // Before any worker subscribes: a sibling's index is the base live events apply to.
  std::vector<std::string> etcd_siblings;
  if (!c.replicas.etcd_prefix.empty()) {
    auto registry = ReplicaRegistry::Create(c.etcd.endpoints, c.replicas.etcd_prefix);
    if (!registry) return std::unexpected(registry.error());
    p.replica_registry = std::move(*registry);
    etcd_siblings = p.replica_registry->Siblings();
  }
  if (p.index) p.warm = WarmIndexBeforeJoins(c, etcd_siblings, *p.index);
  for (std::size_t i = 0; i < c.workers.size(); ++i) {
    fleet::WorkerSpec spec = SpecFromConfig(c.workers[i], p.block_size);
    ApplyWorkerPd(c.workers[i].pd, &spec);  // tp, gpus, link (P/D)
    auto id = p.Join(std::move(spec));
    if (!id) return std::unexpected("workers[" + std::to_string(i) + "]: " + id.error());
  }
  // The snapshot's keep window (replicas.warm_keep_s) for workers joining from discovery.
  if (p.warm) p.warm->Arm();
  if (c.parity_probe) {
    // Joins after this point are probed once the start probe below has run (it covers the
    // workers present then; parity_probe_gateway.cc).
    Parts* raw = &p;
    p.join_probes = std::make_unique<ParityProbeQueue>(
        [raw](const std::vector<WorkerId>& joined) { raw->ProbeJoined(joined); });
  }
  if (!c.etcd.endpoints.empty()) {
    // Workers registered in etcd join by the same path (membership.cc); the first listing
    // happens here, so they are scraped and probed below like the static ones.
    Gateway* self = this;
    MembershipCalls calls{
        .join = [self](fleet::WorkerSpec s) { return self->JoinWorker(std::move(s)); },
        .drain = [self](std::string_view name) { return self->DrainWorker(name); },
        .leave = [self](std::string_view name) { return self->LeaveWorker(name); }};
    auto discovery = EtcdDiscovery::Create(
        EtcdDiscoveryOptions{
            .endpoints = c.etcd.endpoints, .prefix = c.etcd.prefix, .block_size = p.block_size},
        std::move(calls));
    if (!discovery) return std::unexpected(discovery.error());
    p.discovery = std::move(*discovery);
    p.discovery->Start();
  }

  if (p.feed && c.kv_store) {
    // The shared store publishes like an engine; the index holds its blocks once, under an id
    // no worker has, and the request path credits them to every worker (sched/tier_pricing.h).
    const KvEventsConfig& e = c.kv_store->kv_events;
    auto ok = p.feed->AddWorker(sched::kSharedStoreWorker,
                                KvEventSpec{e.endpoint, e.replay_endpoint, e.topic},
                                c.kv_store->host);
    if (!ok) return std::unexpected("kv_store.kv_events: " + ok.error());
    spdlog::info("shared KV store: events from {}", e.endpoint);
  }

  fleet::RouterState* router_state = p.router_state.get();
  ScraperOptions sopts;
  sopts.interval = Ms(c.scrape_interval_s);
  p.scraper = std::make_unique<EngineMetricsScraper>(
      sopts,
      [router_state] {
        std::vector<ScrapeTarget> t;
        for (const auto& w : router_state->List()) t.push_back({w.id, w.spec.base_url});
        return t;
      },
      [router_state, pull_links = std::make_shared<PullLinkFeed>(router_state)](
          WorkerId w, std::expected<EngineMetrics, std::string> m) {
        if (!m) return;
        pull_links->OnScrape(w, *m);  // P/D: the decode worker's KV link, from its pulls
        router_state->SetMetrics(w, std::move(*m));
      },
      &p.clock);
  HealthCheckerOptions hopts;
  hopts.interval = Ms(c.health_interval_s);
  const Clock* clock = &p.clock;
  p.health = std::make_unique<HealthChecker>(
      hopts,
      [router_state, clock] {
        std::vector<ProbeTarget> t;
        for (WorkerId id : router_state->health().ProbeTargets(clock->Now())) {
          if (auto info = router_state->Find(id)) t.push_back({id, info->spec.base_url});
        }
        return t;
      },
      &router_state->health(), &p.clock);
  p.scraper->RunOnce();
  {
    client::BlockingHttpClient http;
    p.RefreshCatalog(http);
  }
  p.scraper->Start();
  p.health->Start();
  if (c.parity_probe) {
    p.RunParityProbe();
    p.join_probes->Start();
  }

  if (c.replicas.share_bookings && c.replicas.HasSiblings()) {
    // Before any booking: every local one is published from the first on.
    DeltaPublisherOptions dopts;
    dopts.flush_interval =
        std::chrono::microseconds(static_cast<std::int64_t>(c.replicas.delta_flush_ms * 1000));
    p.deltas_out =
        std::make_unique<DeltaPublisher>(dopts, router_state, NewReplicaInstanceId());
    router_state->SetBookingListener(p.deltas_out.get());
    p.deltas_out->Start();
  }

  PipelineDeps deps;
  deps.router_state = router_state;
  deps.index = p.index.get();
  deps.predicted = p.predicted.get();
  deps.tokenizer = p.tokenizer;
  deps.policy = p.policy;
  ModelCatalog* catalog = &p.catalog;
  deps.max_model_len = [catalog](std::string_view model) { return catalog->MaxModelLen(model); };
  deps.is_lora_adapter = [catalog](std::string_view model) { return catalog->IsAdapter(model); };
  if (kv::KvIndex* index = p.index.get()) {
    deps.on_salted_route = [index](WorkerId w) { index->MarkSaltedTraffic(w); };
  }
  if (DeltaPublisher* out = p.deltas_out.get()) {
    deps.on_predicted = [out](WorkerId w, std::span<const kv::BlockKey> keys) {
      out->OnPredicted(w, keys);
    };
  }
  PipelineOptions pipe_opts;
  pipe_opts.mode = c.mode;
  pipe_opts.failure_mode = c.failure_mode;
  pipe_opts.block_size = p.block_size;
  pipe_opts.inject_schedule_error = c.debug_fault == "schedule_error";
  pipe_opts.itl_slo_s = c.itl_slo_s;
  pipe_opts.pd_mode = c.pd.mode == "on"    ? PipelineOptions::PdMode::kOn
                      : c.pd.mode == "off" ? PipelineOptions::PdMode::kOff
                                           : PipelineOptions::PdMode::kAuto;
  pipe_opts.pd = PdOptionsOf(c.pd);
  pipe_opts.tenancy = c.tenancy;
  pipe_opts.accept_images = c.images.enabled;
  pipe_opts.set_image_uuid = c.images.set_uuid;
  pipe_opts.image_tokens.placeholder = c.images.placeholder;
  if (c.tokenizer.kind == "hf") {
    pipe_opts.image_tokens =
        tokenize::ImageTokensFromModelConfig(c.tokenizer.model_dir, pipe_opts.image_tokens);
  }
  if (c.images.tokens_per_image > 0) {
    pipe_opts.image_tokens.tokens_per_image = c.images.tokens_per_image;
  }
  if (c.images.token_id >= 0) {
    pipe_opts.image_tokens.token_id = static_cast<TokenId>(c.images.token_id);
  }
  p.pipeline = std::make_unique<RequestPipeline>(std::move(deps), pipe_opts);

  // One pool of lanes for the server and the proxy (see Parts::lanes). proxy_threads used to
  // size separate upstream threads; the shared lanes take the larger of the two settings.
  p.lanes = std::make_shared<net::LanePool>(std::max(c.http_threads, c.proxy_threads));
  ProxyOptions xopts;
  xopts.lanes_pool = p.lanes;
  xopts.max_attempts = c.limits.max_attempts;
  xopts.max_migrations = c.limits.max_migrations;
  xopts.seed = c.scheduler_seed;
  xopts.timeouts.connect = std::chrono::milliseconds(c.timeouts.connect_ms);
  xopts.timeouts.first_byte = std::chrono::milliseconds(c.timeouts.first_byte_ms);
  xopts.timeouts.idle = std::chrono::milliseconds(c.timeouts.idle_ms);
  xopts.pd_prefill_timeout = std::chrono::milliseconds(c.pd.prefill_timeout_ms);
  p.proxy = std::make_unique<Proxy>(xopts, p.pipeline.get(), router_state, &p.metrics, p.parity.get(),
                                    &p.clock);

  net::ServerOptions server_opts;
  server_opts.host = c.host;
  server_opts.port = static_cast<std::uint16_t>(c.port);
  server_opts.lanes = p.lanes;
  // The handler answers 413 with an OpenAI error object; the server only refuses (plain 413,
  // without reading them) bodies far beyond the limit.
  server_opts.body_limit = static_cast<std::size_t>(
      std::max<std::int64_t>(c.limits.max_body_bytes * 4, c.limits.max_body_bytes + (1 << 20)));
  server_opts.server_name = "kvroute";
  p.server = std::make_unique<net::HttpServer>(server_opts);

  auto ctx = std::make_shared<EndpointContext>();
  ctx->config = &p.config;
  ctx->proxy = p.proxy.get();
  ctx->pipeline = p.pipeline.get();
  ctx->router_state = router_state;
  ctx->metrics = &p.metrics;
  ctx->catalog = &p.catalog;
  ctx->tokenizer = p.tokenizer;
  ctx->clock = &p.clock;
  ctx->draining = &p.draining;
  ctx->index = p.index.get();
  ctx->deltas = p.deltas_out.get();
  Parts* raw = &p;
  ctx->refresh_metrics = [raw] { raw->RefreshMetrics(); };
  RegisterEndpoints(*p.server, ctx);
  if (auto ok = p.server->Start(); !ok) return std::unexpected(ok.error());

  p.maintenance = std::thread([raw] { raw->Maintain(); });
  const std::string own_url = AdvertiseUrl(c.replicas.advertise_url, c.host, p.server->port());
  if (p.replica_registry) {  // it listens: siblings may warm from it
    p.replica_registry->Register(own_url);
  }
  if (auto ok = p.StartDeltaSubscribers(own_url); !ok) return ok;
  if (!c.kubernetes.pool.empty()) {
    // Started last, once every part a join touches exists. The pool's pods join by the same path (k8s/pool_discovery.h: ready → join, terminating →
    // drain at once, deleted or not ready → leave).
    class Sink final : public k8s::MembershipSink {
     public:
      explicit Sink(Gateway* g) : g_(g) {}
      std::expected<void, std::string> JoinWorker(fleet::WorkerSpec spec) override {
        const std::string name = spec.name;
        auto ok = g_->JoinWorker(std::move(spec));
        if (!ok) spdlog::warn("inferencepool: worker {} not joined: {}", name, ok.error());
        return ok;
      }
      bool DrainWorker(std::string_view name) override { return g_->DrainWorker(name); }
      bool LeaveWorker(std::string_view name) override { return g_->LeaveWorker(name); }
      void Rejected(std::string_view name, const std::string& why) override {
        spdlog::warn("inferencepool: worker {} not joined: {}", name, why);
      }

     private:
      Gateway* g_;
    };
    p.pool_sink = std::make_unique<Sink>(this);
    k8s::PoolWatcherOptions o;
    o.api_url = c.kubernetes.api_url;
    o.token_file = c.kubernetes.token_file;
    o.ca_file = c.kubernetes.ca_file;
    o.namespace_name = c.kubernetes.namespace_name;
    o.pool_name = c.kubernetes.pool;
    o.models = c.kubernetes.models;
    o.source = c.kubernetes.source == "endpointslices" ? k8s::DiscoverySource::kEndpointSlices
                                                       : k8s::DiscoverySource::kPods;
    o.service = c.kubernetes.service;
    o.on_step = [metrics = &p.metrics](const std::string& step, bool failed) {
      spdlog::log(failed ? spdlog::level::warn : spdlog::level::info, "inferencepool: {}", step);
      if (failed) metrics->OnKubernetesDiscoveryFailure();
    };
    auto watcher = k8s::PoolWatcher::Start(std::move(o), p.pool_sink.get());
    if (!watcher) return std::unexpected("discovery.kubernetes: " + watcher.error());
    p.pool_watcher = std::move(*watcher);
  }
  return {};
}

std::uint16_t Gateway::port() const { return parts_->server ? parts_->server->port() : 0; }
std::uint32_t Gateway::block_size() const { return parts_->block_size; }
const sched::Policy& Gateway::policy() const { return *parts_->policy; }
RequestPath Gateway::request_path() const {
  return {parts_->pipeline.get(), parts_->router_state.get(), &parts_->metrics, &parts_->clock};
}

std::size_t Gateway::Drain() {
  Parts& p = *parts_;
  if (p.stopped) return 0;
  p.draining = true;
  // Leaving: no sibling starting from now warms from this replica.
  if (p.replica_registry) {
    ReplicaRegistry* registry = p.replica_registry.get();
    p.replica_withdraw = std::thread([registry] { registry->Withdraw(); });
  }
  std::size_t cut = 0;
  if (p.server) {
    spdlog::info(
        "draining: readiness false; refusing new connections in {} s; in-flight "
        "requests get up to {} s",
        p.config.shutdown_grace_s, p.config.drain_timeout_s);
    std::this_thread::sleep_for(Ms(p.config.shutdown_grace_s));
    // Siblings keep counting this replica's requests while they drain (docs/replicas.md).
    const auto spent = p.DrainDeltaStreams(Ms(p.config.drain_timeout_s));
    cut = p.server->Shutdown(std::max(Ms(p.config.drain_timeout_s) - spent,
                                      std::chrono::milliseconds(0)));
  }
  Stop();
  return cut;
}

void Gateway::Stop() {
  Parts& p = *parts_;
  if (p.stopped) return;
  p.stopped = true;
  p.draining = true;
  if (p.replica_withdraw.joinable()) p.replica_withdraw.join();
  if (p.replica_registry) p.replica_registry->Withdraw();
  if (p.discovery) p.discovery->Stop();  // no joins or leaves while the parts stop
  if (p.pool_watcher) p.pool_watcher->Stop();
  if (p.deltas_in) p.deltas_in->Stop();    // the siblings' bookings stop arriving
  if (p.deltas_out) p.deltas_out->Stop();  // ends the siblings' streams before the cut
  if (p.server) p.server->Shutdown(std::chrono::milliseconds(0));
  if (p.join_probes) p.join_probes->Stop();  // before the feed and index its probes read
  {
    std::lock_guard lock(p.mu);
    p.stop = true;
  }
  p.cv.notify_all();
  if (p.maintenance.joinable()) p.maintenance.join();
  if (p.proxy) p.proxy->Stop();
  if (p.lanes) p.lanes->Stop();
  // No booking call can run now (proxy and lanes stopped): the publisher may go.
  if (p.router_state) p.router_state->SetBookingListener(nullptr);
  if (p.health) p.health->Stop();
  if (p.scraper) p.scraper->Stop();
  p.feed.reset();
}

}  // namespace kvroute::gateway

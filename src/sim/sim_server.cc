#include "sim/sim_server.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <spdlog/spdlog.h>

#include <array>
#include <atomic>
#include <chrono>
#include <map>
#include <random>

#include "engine/engine.h"
#include "engine/profile.h"
#include "kv/wire/zmq_publisher.h"
#include "engine/step_time.h"
#include "store/store_client.h"
#include "net/http_server.h"
#include "sim/engine_loop.h"
#include "sim/kv_puller.h"
#include "sim/output_palette.h"
#include "sim/pd_metrics.h"
#include "sim/side_channel.h"
#include "sim/sim_handlers.h"
#include "telemetry/vllm_metrics.h"

namespace kvroute::sim {

namespace {

tokenize::ImageTokenOptions ImageTokensOf(const SimConfig& config) {
  tokenize::ImageTokenOptions o{.placeholder = config.image_placeholder};
  if (!config.tokenizer.empty()) o = tokenize::ImageTokensFromModelConfig(config.tokenizer, o);
  if (config.image_tokens > 0) o.tokens_per_image = config.image_tokens;
  if (config.image_token_id >= 0) o.token_id = static_cast<TokenId>(config.image_token_id);
  return o;
}

// vLLM names an engine with a uuid4 unless kv_transfer_config.engine_id says otherwise.
std::string RandomEngineId() {
  std::mt19937_64 rng{std::random_device{}()};
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng()));
  return std::string(buf, 8) + "-" + std::string(buf + 8, 4) + "-" + std::string(buf + 12, 4) +
         "-" + std::string(buf + 16, 4) + "-" + std::string(buf + 20, 12);
}

// The side channel binds where it is advertised; "localhost" (vLLM's default) is loopback.
std::string BindAddressOf(const std::string& host) {
  return host == "localhost" ? std::string("127.0.0.1") : host;
}

}  // namespace

// Members in construction order; destroyed in reverse (HTTP first, publisher last).
struct SimServer::State {
  SimConfig config;
  tokenize::TokenizerPtr tokenizer;
  std::string served_model_name;
  SteadyClock clock;
  prometheus::Registry registry;
  std::unique_ptr<telemetry::VllmMetrics> metrics;
  std::unique_ptr<kv::ZmqEventPublisher> publisher;
  // P/D: metrics and the decode side's puller outlive the loop (its requests release
  // through the puller); the prefill side's side channel stops before the loop.
  std::unique_ptr<PdMetrics> pd_metrics;
  std::unique_ptr<KvPuller> puller;
  std::unique_ptr<PdContext> pd;
  std::unique_ptr<EngineLoop> loop;
  std::atomic<bool> draining{false};
  std::unique_ptr<net::HttpServer> side_channel;
  std::unique_ptr<net::HttpServer> http;
  bool started = false;
  bool stopped = false;

  State(const SimConfig& c, tokenize::TokenizerPtr t)
      : config(c), tokenizer(std::move(t)), clock(c.speedup) {}
};

SimServer::SimServer(std::unique_ptr<State> state) : state_(std::move(state)) {}

SimServer::~SimServer() { Shutdown(std::chrono::milliseconds(0)); }

std::expected<std::unique_ptr<SimServer>, std::string> SimServer::Create(
    const SimConfig& config, tokenize::TokenizerPtr tokenizer) {
  if (auto ok = Validate(config); !ok) return std::unexpected(ok.error());
  if (!tokenizer) return std::unexpected("no tokenizer");
  auto profile = engine::LoadProfile(config.profile);
  if (!profile) return std::unexpected("--profile: " + profile.error());

  auto s = std::make_unique<State>(config, tokenizer);
  engine::EngineConfig engine_config = config.ToEngineConfig();
  engine_config.output_vocabulary = BuildOutputPalette(*tokenizer);
  std::shared_ptr<store::HttpSharedStore> store_client;
  if (!config.kv_store.empty()) {
    // The shared tier: `kvroute store` at --kv-store (README "KV tiers").
    const auto where = ParseHostPort(config.kv_store);
    engine_config.shared.store = store_client = std::make_shared<store::HttpSharedStore>(
        store::HttpSharedStoreOptions{
            .host = where->first,
            .port = where->second,
            .block_size = engine_config.block_size,
            .block_bytes = engine_config.block_size *
                           engine::StepTimeModel(*profile).KvBytesPerTokenTransfer()});
  }
  engine_config = engine::ResolveConfig(*profile, engine_config);
  s->served_model_name =
      config.served_model_name.empty() ? profile->served_model_name : config.served_model_name;

  s->metrics = std::make_unique<telemetry::VllmMetrics>(
      s->registry, telemetry::VllmMetricLabels{.model_name = s->served_model_name, .engine = "0"},
      engine_config.max_model_len);
  // vLLM stringifies its CacheConfig attributes (Python spelling for booleans).
  s->metrics->SetCacheConfigInfo({
      {"block_size", std::to_string(engine_config.block_size)},
      {"num_gpu_blocks", std::to_string(engine_config.num_gpu_blocks_override)},
      {"num_cpu_blocks", std::to_string(engine_config.num_cpu_blocks)},
      {"enable_prefix_caching", engine_config.enable_prefix_caching ? "True" : "False"},
      {"prefix_caching_hash_algo", "sha256_cbor"},
      {"cache_dtype", "auto"},
      {"gpu_memory_utilization", std::to_string(profile->runtime.gpu_memory_utilization)},
  });

  if (config.kv_events) {
    kv::ZmqPublisherOptions options;
    options.endpoint = config.kv_events_endpoint;
    options.replay_endpoint = config.kv_events_replay_endpoint;
    options.buffer_steps = config.kv_events_buffer_steps;
    options.topic = config.kv_events_topic;
    options.encode.events =
        config.kv_events_encoding == "array" ? kv::EventLayout::kArray : kv::EventLayout::kMap;
    if (config.kv_events_drop_every > 1) {
      // Test only (--kv-events-drop-every): seq N-1, 2N-1, ... are lost on the wire but kept
      // for replay, so a subscriber must detect the gap and repair it.
      const std::uint64_t n = config.kv_events_drop_every;
      options.drop_on_wire_for_test = [n](std::uint64_t seq) { return (seq + 1) % n == 0; };
    }
    auto publisher = kv::ZmqEventPublisher::Create(std::move(options));
    if (!publisher) return std::unexpected("--kv-events-endpoint: " + publisher.error());
    s->publisher = std::move(*publisher);
  }

  EngineLoopOptions loop_options;
  loop_options.metrics = s->metrics.get();
  if (engine_config.num_cpu_blocks > 0 || engine_config.disk.num_blocks > 0 ||
      engine_config.shared.store != nullptr) {
    // vLLM's KV-connector prefix-cache counters, for the lower tiers (see EngineLoopOptions).
    const std::map<std::string, std::string> labels = {{"model_name", s->served_model_name},
                                                       {"engine", "0"}};
    loop_options.external_queries =
        &prometheus::BuildCounter()
             .Name("vllm:external_prefix_cache_queries_total")
             .Help(
                 "External prefix cache queries from KV connector cross-instance cache "
                 "sharing, in terms of number of queried tokens.")
             .Register(s->registry)
             .Add(labels);
    loop_options.external_hits =
        &prometheus::BuildCounter()
             .Name("vllm:external_prefix_cache_hits_total")
             .Help(
                 "External prefix cache hits from KV connector cross-instance cache sharing, "
                 "in terms of number of cached tokens.")
             .Register(s->registry)
             .Add(labels);
  }
  if (loop_options.external_hits != nullptr) {
    // Per-tier occupancy, evictions, hits and bytes loaded (kvroute's names: vLLM exports
    // only the connector's hit counters above). Registered only with a lower tier, so the
    // /metrics of a GPU-only sim is what it always was.
    const std::map<std::string, std::string> base = {{"model_name", s->served_model_name},
                                                     {"engine", "0"}};
    auto& blocks = prometheus::BuildGauge()
                       .Name("kvroute:kv_tier_blocks")
                       .Help("KV blocks cached in each tier now (the store's own are its).")
                       .Register(s->registry);
    auto& capacity = prometheus::BuildGauge()
                         .Name("kvroute:kv_tier_capacity_blocks")
                         .Help("KV block capacity of each local tier.")
                         .Register(s->registry);
    auto& evictions = prometheus::BuildCounter()
                          .Name("kvroute:kv_tier_evictions_total")
                          .Help("Cached KV blocks each local tier evicted for room.")
                          .Register(s->registry);
    auto& hits = prometheus::BuildCounter()
                     .Name("kvroute:kv_tier_hit_tokens_total")
                     .Help("Prompt tokens served from each tier's cache.")
                     .Register(s->registry);
    auto& loaded = prometheus::BuildCounter()
                       .Name("kvroute:kv_tier_load_bytes_total")
                       .Help("Bytes loaded into GPU memory from each lower tier (modelled).")
                       .Register(s->registry);
    struct TierMetrics {
      prometheus::Gauge* blocks;
      prometheus::Gauge* capacity;
      prometheus::Counter* evictions;
      prometheus::Counter* hits;
      prometheus::Counter* loaded;
    };
    auto tiers = std::make_shared<std::array<TierMetrics, kv::kNumTiers>>();
    for (int t = 0; t < kv::kNumTiers; ++t) {
      auto labels = base;
      labels["tier"] = kv::TierName(static_cast<kv::Tier>(t));
      (*tiers)[t] = {&blocks.Add(labels), &capacity.Add(labels), &evictions.Add(labels),
                     &hits.Add(labels), &loaded.Add(labels)};
    }
    // The store client's own calls and failures (a store that is down or slow shows here
    // first: its matches fail as misses, its leases as none). Only with --kv-store.
    using ClientCount = std::uint64_t store::HttpSharedStoreCounters::*;
    struct ClientEvent {
      prometheus::Counter* counter;
      ClientCount count;
    };
    std::vector<ClientEvent> client_events;
    if (store_client) {
      auto& calls = prometheus::BuildCounter()
                        .Name("kvroute:kv_store_client_total")
                        .Help("This sim's calls to its shared KV store, and their failures, by "
                              "event (a failed match is a miss; a failed lease is none).")
                        .Register(s->registry);
      using C = store::HttpSharedStoreCounters;
      for (auto [event, count] : std::initializer_list<std::pair<const char*, ClientCount>>{
               {"matches", &C::matches}, {"match_failures", &C::match_failures},
               {"put_batches", &C::put_batches}, {"put_failures", &C::put_failures},
               {"puts_dropped", &C::puts_dropped}, {"leases", &C::leases},
               {"lease_failures", &C::lease_failures}}) {
        auto labels = base;
        labels["event"] = event;
        client_events.push_back({&calls.Add(labels), count});
      }
    }
    loop_options.on_stats = [tiers, store_client, client_events](const engine::EngineStats& st) {
      if (store_client) {
        const store::HttpSharedStoreCounters c = store_client->counters();
        for (const ClientEvent& e : client_events) {
          telemetry::VllmMetrics::AdvanceTo(*e.counter, static_cast<double>(c.*e.count));
        }
      }
      const double caps[kv::kNumTiers] = {static_cast<double>(st.num_gpu_blocks),
                                          static_cast<double>(st.num_cpu_blocks),
                                          static_cast<double>(st.num_disk_blocks), 0};
      for (int t = 0; t < kv::kNumTiers; ++t) {
        TierMetrics& m = (*tiers)[t];
        m.blocks->Set(static_cast<double>(st.tier_blocks[t]));
        m.capacity->Set(caps[t]);
        telemetry::VllmMetrics::AdvanceTo(*m.evictions, static_cast<double>(st.tier_evictions[t]));
        telemetry::VllmMetrics::AdvanceTo(*m.hits, static_cast<double>(st.tier_hit_tokens[t]));
        telemetry::VllmMetrics::AdvanceTo(*m.loaded, st.tier_load_bytes[t]);
      }
    };
  }
  if (config.kv_transfer) {
    const KvTransferConfig& kt = *config.kv_transfer;
    if (kt.CanConsume() && !(engine_config.kv_link.bandwidth_bytes_per_s > 0)) {
      return std::unexpected("--kv-link: profile '" + profile->name + "' has no link" +
                             (config.kv_link.empty() ? "" : " named '" + config.kv_link + "'") +
                             " for decode legs to pull KV over");
    }
    s->pd_metrics = std::make_unique<PdMetrics>(
        s->registry, telemetry::VllmMetricLabels{.model_name = s->served_model_name, .engine = "0"});
    s->pd = std::make_unique<PdContext>();
    s->pd->config = kt;
    s->pd->identity = PrefillIdentity{
        .engine_id = kt.engine_id.empty() ? RandomEngineId() : kt.engine_id,
        .host = config.kv_side_channel_host,
        .port = config.kv_side_channel_port,
        .tp_size = profile->hardware.num_gpus,
    };
    if (kt.CanConsume()) {
      s->puller = std::make_unique<KvPuller>(KvPullerOptions{
          .block_size = engine_config.block_size, .metrics = s->pd_metrics.get()});
      s->pd->puller = s->puller.get();
    }
    PdMetrics* m = s->pd_metrics.get();
    KvPuller* puller = s->puller.get();
    const double timeout_s = config.nixl_abort_request_timeout_s;
    loop_options.on_pd_events = [m, puller, timeout_s](const engine::StepResult& r) {
      for (const engine::KvTransferDone& t : r.kv_transfers_done) {
        m->xfer_time.Observe(ToSeconds(t.finished - t.started));
        m->bytes_transferred.Observe(t.bytes);
        m->transferred_blocks.Increment(t.blocks);
        if (puller != nullptr) puller->Release(t.request_id, t.blocks);
      }
      for (const std::string& id : r.pins_expired) {
        m->expired_reqs.Increment();
        spdlog::warn("P/D: the pinned KV of request {} expired unread after {} s; freed", id,
                     timeout_s);
      }
    };
    loop_options.pinned_blocks = &m->pinned_blocks;
    loop_options.pinned_requests = &m->pinned_requests;
  }
  if (s->publisher) {
    kv::ZmqEventPublisher* publisher = s->publisher.get();
    loop_options.publish = [publisher](kv::KvEventBatch batch) {
      publisher->Publish(std::move(batch));
    };
  }
  s->loop = std::make_unique<EngineLoop>(engine::NewEngine(*profile, engine_config), s->clock,
                                         std::move(loop_options));

  s->http = std::make_unique<net::HttpServer>(net::ServerOptions{
      .host = config.host,
      .port = static_cast<std::uint16_t>(config.port),
      .threads = config.http_threads,
      .server_name = "kvroute-sim",
  });
  SimContext ctx{
      .served_model_name = s->served_model_name,
      .model_root = profile->model.hf_name.empty() ? s->served_model_name : profile->model.hf_name,
      .lora_modules = config.lora_modules,
      .image_tokens = ImageTokensOf(config),
      .max_model_len = engine_config.max_model_len,
      .seed = config.seed,
      .created = std::chrono::duration_cast<std::chrono::seconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count(),
      .tokenizer = s->tokenizer,
      .loop = s->loop.get(),
      .registry = &s->registry,
      .metrics = s->metrics.get(),
      .draining = &s->draining,
      .publisher = s->publisher.get(),
      .pd = s->pd.get(),
  };
  RegisterSimHandlers(ctx, *s->http);
  if (s->pd && s->pd->config.CanProduce()) {
    s->side_channel = std::make_unique<net::HttpServer>(net::ServerOptions{
        .host = BindAddressOf(config.kv_side_channel_host),
        .port = static_cast<std::uint16_t>(config.kv_side_channel_port),
        .threads = 1,
        .server_name = "kvroute-sim-side-channel",
    });
    RegisterSideChannelHandlers(
        SideChannelContext{.loop = s->loop.get(),
                           .engine_id = s->pd->identity.engine_id,
                           .tp_size = s->pd->identity.tp_size,
                           .block_size = engine_config.block_size,
                           .metrics = s->pd_metrics.get()},
        *s->side_channel);
  }
  return std::unique_ptr<SimServer>(new SimServer(std::move(s)));
}

std::expected<void, std::string> SimServer::Start() {
  State& s = *state_;
  s.loop->Start();
  if (s.side_channel) {
    if (auto ok = s.side_channel->Start(); !ok) return std::unexpected("--kv-side-channel-port: " + ok.error());
    // Port 0 resolved: prefill answers name the port actually bound (before any request).
    s.pd->identity.port = s.side_channel->port();
  }
  if (auto ok = s.http->Start(); !ok) return ok;
  s.started = true;
  return {};
}

std::size_t SimServer::Shutdown(std::chrono::milliseconds grace) {
  State& s = *state_;
  if (s.stopped) return 0;
  s.stopped = true;
  s.draining = true;
  std::size_t cut = s.http->Shutdown(grace);
  // Decoders still reading are cut with it; their pins expire with the process.
  if (s.side_channel) s.side_channel->Shutdown(std::chrono::milliseconds(0));
  s.loop->Stop();
  if (s.publisher) s.publisher->Shutdown();
  return cut;
}

std::uint16_t SimServer::port() const { return state_->http->port(); }
const std::string& SimServer::served_model_name() const { return state_->served_model_name; }
std::string SimServer::kv_events_endpoint() const {
  return state_->publisher ? state_->publisher->endpoint() : std::string();
}
std::string SimServer::kv_side_channel() const {
  if (!state_->pd || !state_->side_channel) return {};
  return state_->pd->identity.host + ":" + std::to_string(state_->pd->identity.port);
}
std::string SimServer::kv_engine_id() const {
  return state_->pd ? state_->pd->identity.engine_id : std::string();
}
std::string SimServer::kv_events_replay_endpoint() const {
  return state_->publisher ? state_->publisher->replay_endpoint() : std::string();
}

}  // namespace kvroute::sim

#include "store/store_server.h"

#include <boost/json.hpp>
#include <chrono>
#include <utility>

#include "api/api_error.h"
#include "kv/wire/zmq_publisher.h"
#include "net/http_server.h"
#include "store/store_wire.h"

namespace kvroute::store {
namespace {

net::HttpResponse BadRequest(const std::string& message) {
  const api::ApiError e = api::ApiError::InvalidRequest(message);
  return net::JsonResponse(e.status, e.Body());
}

double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

StoreServer::StoreServer(StoreServerOptions options)
    : options_(std::move(options)), start_(std::chrono::steady_clock::now()), core_(options_.store) {}

Nanos StoreServer::Now() const {
  return std::chrono::duration_cast<Nanos>(std::chrono::steady_clock::now() - start_);
}

void StoreServer::Publish(std::vector<kv::KvEvent> events, bool heartbeat) {
  if ((events.empty() && !heartbeat) || publisher_ == nullptr) return;
  published_since_sweep_.store(true);
  publisher_->Publish(kv::KvEventBatch{.ts = WallSeconds(), .events = std::move(events)});
}

std::expected<std::unique_ptr<StoreServer>, std::string> StoreServer::Start(
    StoreServerOptions options) {
  if (options.store.block_size == 0) return std::unexpected("--block-size must be > 0");
  if (!(options.store.capacity_bytes > 0)) return std::unexpected("--capacity-bytes must be > 0");
  if (!(options.store.lease_ttl > Nanos(0))) return std::unexpected("--lease-ttl must be > 0");
  // Each life of the store numbers its leases from a different point (the wall clock in
  // microseconds), so a sim's lease from before a restart never names a new one's.
  options.store.first_lease_id = static_cast<std::uint64_t>(WallSeconds() * 1e6);
  std::unique_ptr<StoreServer> s(new StoreServer(std::move(options)));
  kv::ZmqPublisherOptions zo;
  zo.endpoint = s->options_.kv_events_endpoint;
  zo.replay_endpoint = s->options_.kv_events_replay_endpoint;
  auto publisher = kv::ZmqEventPublisher::Create(std::move(zo));
  if (!publisher) return std::unexpected("--kv-events-endpoint: " + publisher.error());
  s->publisher_ = std::move(*publisher);
  // A router that indexed an earlier life of this store drops what it credited to it.
  std::vector<kv::KvEvent> hello;
  hello.emplace_back(std::in_place_type<kv::AllBlocksCleared>);
  s->Publish(std::move(hello));

  net::ServerOptions so;
  so.host = s->options_.host;
  so.port = s->options_.port;
  so.threads = 1;  // the core is one mutex: more lanes would only queue on it
  so.server_name = "kvroute-store";
  s->http_ = std::make_unique<net::HttpServer>(so);
  StoreServer* self = s.get();
  s->http_->Handle("POST", "/v1/kv/match", [self](net::HttpRequest&& r) -> net::HandlerResult {
    auto hashes = DecodeMatch(r.body);
    if (!hashes) return BadRequest(hashes.error());
    std::vector<kv::KvEvent> events;
    std::size_t n = 0;
    {
      std::lock_guard lock(self->mu_);
      n = self->core_.Match(*hashes, self->Now(), &events);
    }
    self->Publish(std::move(events));
    return net::JsonResponse(200, boost::json::serialize(boost::json::object{{"matched", n}}));
  });
  s->http_->Handle("POST", "/v1/kv/put", [self](net::HttpRequest&& r) -> net::HandlerResult {
    auto put = DecodePut(r.body);
    if (!put) return BadRequest(put.error());
    if (put->block_size != self->options_.store.block_size) {
      return BadRequest("block_size " + std::to_string(put->block_size) + " differs from the " +
                        "store's " + std::to_string(self->options_.store.block_size));
    }
    std::vector<kv::KvEvent> events;
    std::uint64_t stored = 0, refreshed = 0;
    {
      std::lock_guard lock(self->mu_);
      const StoreCounters before = self->core_.counters();
      self->core_.Put(put->blocks, self->Now(), &events);
      stored = self->core_.counters().stored - before.stored;
      refreshed = self->core_.counters().refreshed - before.refreshed;
    }
    self->Publish(std::move(events));
    return net::JsonResponse(200, boost::json::serialize(boost::json::object{
                                      {"stored", stored}, {"refreshed", refreshed}}));
  });
  s->http_->Handle("POST", "/v1/kv/lease", [self](net::HttpRequest&& r) -> net::HandlerResult {
    auto hashes = DecodeMatch(r.body);
    if (!hashes) return BadRequest(hashes.error());
    std::vector<kv::KvEvent> events;
    LeaseGrant grant;
    {
      std::lock_guard lock(self->mu_);
      grant = self->core_.Lease(*hashes, self->Now(), &events);
    }
    self->Publish(std::move(events));
    return net::JsonResponse(200, EncodeLeaseReply(grant));
  });
  s->http_->Handle("POST", "/v1/kv/release", [self](net::HttpRequest&& r) -> net::HandlerResult {
    auto lease = DecodeRelease(r.body);
    if (!lease) return BadRequest(lease.error());
    bool released = false;
    {
      std::lock_guard lock(self->mu_);
      released = self->core_.Release(*lease, self->Now());
    }
    return net::JsonResponse(200, released ? R"({"released":true})" : R"({"released":false})");
  });
  s->http_->Handle("GET", "/health", [](net::HttpRequest&&) -> net::HandlerResult {
    return net::JsonResponse(200, R"({"status":"ok"})");
  });
  s->http_->Handle("GET", "/metrics", [self](net::HttpRequest&&) -> net::HandlerResult {
    return net::TextResponse(200, self->Metrics(), "text/plain; version=0.0.4");
  });
  if (auto started = s->http_->Start(); !started) return std::unexpected(started.error());

  s->sweeper_ = std::thread([self] {
    std::unique_lock lock(self->mu_);
    while (!self->stopping_) {
      self->sweep_cv_.wait_for(lock, self->options_.sweep_interval);
      if (self->stopping_) break;
      std::vector<kv::KvEvent> events;
      self->core_.Expire(self->Now(), &events);
      lock.unlock();
      // An idle store still sends a (possibly empty) batch each interval: its sequence
      // number is what tells a router that the store restarted (seq back at 0, or a gap it
      // repairs by replay, which holds the restart's AllBlocksCleared), even when no sim
      // calls. The first batch after a restart is otherwise lost to ZMQ's slow joiner.
      const bool idle = !self->published_since_sweep_.exchange(false);
      self->Publish(std::move(events), idle);
      lock.lock();
    }
  });
  return s;
}

std::string StoreServer::Metrics() const {
  std::lock_guard lock(mu_);
  const StoreCounters& c = core_.counters();
  std::string out;
  auto line = [&out](const std::string& name, const std::string& type, const std::string& help,
                     const std::string& labels, double v) {
    out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + labels +
           " " + std::to_string(v) + "\n";
  };
  line("kvroute_store_blocks", "gauge", "Blocks held.", "", static_cast<double>(core_.size()));
  line("kvroute_store_used_bytes", "gauge", "Bytes held (modelled).", "", core_.used_bytes());
  line("kvroute_store_capacity_bytes", "gauge", "Capacity.", "", core_.options().capacity_bytes);
  line("kvroute_store_stored_total", "counter", "New blocks stored.", "",
       static_cast<double>(c.stored));
  out += "# HELP kvroute_store_removed_total Blocks removed, by reason.\n"
         "# TYPE kvroute_store_removed_total counter\n"
         "kvroute_store_removed_total{reason=\"lru\"} " + std::to_string(c.evicted) + "\n" +
         "kvroute_store_removed_total{reason=\"ttl\"} " + std::to_string(c.expired) + "\n";
  line("kvroute_store_queried_blocks_total", "counter", "Blocks asked for by match.", "",
       static_cast<double>(c.queried_blocks));
  line("kvroute_store_hit_blocks_total", "counter", "Blocks match found.", "",
       static_cast<double>(c.hit_blocks));
  line("kvroute_store_leases", "gauge", "Live leases.", "",
       static_cast<double>(core_.live_leases()));
  line("kvroute_store_leased_blocks", "gauge", "Blocks held under a lease (not evictable).", "",
       static_cast<double>(core_.leased_size()));
  line("kvroute_store_leases_total", "counter", "Leases granted.", "",
       static_cast<double>(c.leases));
  line("kvroute_store_leases_expired_total", "counter",
       "Leases ended by the lease TTL, never released.", "",
       static_cast<double>(c.leases_expired));
  line("kvroute_store_refused_full_total", "counter",
       "New blocks refused because every held block was leased.", "",
       static_cast<double>(c.refused_full));
  return out;
}

std::uint16_t StoreServer::port() const { return http_->port(); }
std::string StoreServer::events_endpoint() const { return publisher_->endpoint(); }
std::string StoreServer::replay_endpoint() const { return publisher_->replay_endpoint(); }
StoreCounters StoreServer::counters() const {
  std::lock_guard lock(mu_);
  return core_.counters();
}
std::size_t StoreServer::size() const {
  std::lock_guard lock(mu_);
  return core_.size();
}

void StoreServer::Shutdown() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  sweep_cv_.notify_all();
  if (sweeper_.joinable()) sweeper_.join();
  if (http_) http_->Shutdown(std::chrono::milliseconds(500));
  if (publisher_) publisher_->Shutdown();
}

StoreServer::~StoreServer() { Shutdown(); }

}  // namespace kvroute::store

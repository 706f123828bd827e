#include "kv/wire/zmq_subscriber.h"

#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "kv/wire/event_decode.h"
#include "kv/wire/zmq_publisher.h"

namespace kvroute::kv {
namespace {

std::uint64_t GetBigEndian64(const void* data) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
}

bool SubscriberBinds(const ZmqSubscriberOptions& o) {
  switch (o.mode) {
    case SocketMode::kConnect:
      return false;
    case SocketMode::kBind:
      return true;
    case SocketMode::kAuto:
      break;
  }
  const std::string& e = o.endpoint;
  // A wildcard host or port cannot be connected to, so it can only mean "bind here".
  return e.find('*') != std::string::npos || e.find("://0.0.0.0") != std::string::npos ||
         e.find("://[::]") != std::string::npos;
}

bool HasAllBlocksCleared(const KvEventBatch& batch) {
  for (const KvEvent& e : batch.events) {
    if (std::holds_alternative<AllBlocksCleared>(e)) return true;
  }
  return false;
}

}  // namespace

namespace {

// Splits "tcp://HOST:PORT" into HOST and ":PORT"; false for other transports.
bool SplitTcp(std::string_view endpoint, std::string_view* host, std::string_view* port) {
  constexpr std::string_view kTcp = "tcp://";
  if (!endpoint.starts_with(kTcp)) return false;
  std::string_view rest = endpoint.substr(kTcp.size());
  const std::size_t colon = rest.rfind(':');
  if (colon == std::string_view::npos) return false;
  *host = rest.substr(0, colon);
  *port = rest.substr(colon);
  return true;
}

bool IsWildcardHost(std::string_view host) {
  return host == "*" || host == "[::]" || host == "::" || host == "0.0.0.0";
}

std::string WithHost(std::string_view port, std::string_view host) {
  const bool ipv6 = host.find(':') != std::string_view::npos && !host.starts_with('[');
  std::string out = "tcp://";
  out += ipv6 ? "[" + std::string(host) + "]" : std::string(host);
  out += port;
  return out;
}

}  // namespace

SubscriberEndpoint SubscriberEndpointFor(std::string_view engine_endpoint,
                                         std::string_view engine_host) {
  std::string_view host;
  std::string_view port;
  const bool tcp = SplitTcp(engine_endpoint, &host, &port);
  if (!EngineBindsEndpoint(engine_endpoint)) {
    // The engine connects to us: listen on that port everywhere.
    return {tcp ? WithHost(port, "*") : std::string(engine_endpoint), SocketMode::kBind};
  }
  if (tcp && IsWildcardHost(host)) return {WithHost(port, engine_host), SocketMode::kConnect};
  return {std::string(engine_endpoint), SocketMode::kConnect};
}

std::string ReplayEndpointFor(std::string_view engine_replay_endpoint,
                              std::string_view engine_host) {
  std::string_view host;
  std::string_view port;
  if (SplitTcp(engine_replay_endpoint, &host, &port) && IsWildcardHost(host)) {
    return WithHost(port, engine_host);
  }
  return std::string(engine_replay_endpoint);
}

struct ZmqEventSubscriber::Impl {
  ZmqSubscriberOptions options;
  SubscriberCallbacks callbacks;
  zmq::context_t ctx{1};
  zmq::socket_t sub;
  std::atomic<bool> stop{false};

  // Sequence state (subscriber thread only).
  bool have_last = false;
  std::uint64_t last = 0;
  bool stale = false;

  std::atomic<std::uint64_t> messages{0}, batches{0}, events{0}, malformed{0}, gaps{0}, replayed{0},
      stale_episodes{0}, restarts{0}, unknown_events{0};

  static void Bump(std::atomic<std::uint64_t>& c, std::uint64_t n = 1) {
    c.fetch_add(n, std::memory_order_relaxed);
  }

  void Run() {
    while (!stop.load(std::memory_order_acquire)) {
      zmq::pollitem_t item{sub.handle(), 0, ZMQ_POLLIN, 0};
      try {
        zmq::poll(&item, 1, options.poll_interval);
      } catch (const zmq::error_t&) {
        continue;  // EINTR
      }
      if ((item.revents & ZMQ_POLLIN) == 0) continue;
      // Bounded burst so Stop() is noticed under a flood.
      for (int i = 0; i < 1024 && !stop.load(std::memory_order_acquire); ++i) {
        std::vector<zmq::message_t> frames;
        try {
          if (!zmq::recv_multipart(sub, std::back_inserter(frames), zmq::recv_flags::dontwait)) {
            break;
          }
        } catch (const zmq::error_t&) {
          break;
        }
        OnMessage(frames);
      }
    }
  }

  void OnMessage(const std::vector<zmq::message_t>& frames) {
    Bump(messages);
    if (frames.size() != 3 || frames[1].size() != 8) {
      Bump(malformed);
      return;
    }
    const std::uint64_t seq = GetBigEndian64(frames[1].data());
    if (have_last && seq <= last) {
      Bump(restarts);
      have_last = false;
      if (callbacks.on_restart) callbacks.on_restart(options.worker);
      SetStale(false);
    }
    const std::uint64_t expected = have_last ? last + 1 : 0;
    if (seq > expected) {
      Bump(gaps);
      if (!Replay(expected, seq)) SetStale(true);
    }
    have_last = true;
    last = seq;
    DecodeAndDeliver(seq, frames[2].data<std::uint8_t>(), frames[2].size(), /*replayed=*/false);
  }

  // False (and the worker marked stale) when the payload does not decode.
  bool DecodeAndDeliver(std::uint64_t seq, const std::uint8_t* data, std::size_t size,
                        bool from_replay) {
    KvEventBatch batch;
    DecodeInfo info;
    if (!DecodeEventBatch(data, size, &batch, &info).ok()) {
      Bump(malformed);
      SetStale(true);
      return false;
    }
    Bump(batches);
    Bump(events, batch.events.size());
    Bump(unknown_events, info.unknown_events);
    if (from_replay) Bump(replayed);
    if (callbacks.on_batch) callbacks.on_batch(options.worker, seq, batch);
    if (stale && HasAllBlocksCleared(batch)) SetStale(false);
    return true;
  }

  void SetStale(bool value) {
    if (stale == value) return;
    stale = value;
    if (value) Bump(stale_episodes);
    if (callbacks.on_stale) callbacks.on_stale(options.worker, value);
  }

  // Fetches [from, upto) from the replay socket and delivers it as it arrives. vLLM answers in
  // ascending seq order, so the first seq past `next` means the buffer no longer holds `next`:
  // stop there rather than read (and hold) the rest of a possibly 10,000-batch buffer. True
  // when the whole range was delivered.
  bool Replay(std::uint64_t from, std::uint64_t upto) {
    if (options.replay_endpoint.empty()) return false;
    std::uint64_t next = from;
    try {
      // A fresh DEALER per repair: late answers to an abandoned request cannot leak into the
      // next one.
      zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
      dealer.set(zmq::sockopt::linger, 0);
      dealer.connect(options.replay_endpoint);
      std::uint8_t start[8];
      for (int i = 0; i < 8; ++i) start[i] = static_cast<std::uint8_t>(from >> (56 - 8 * i));
      dealer.send(zmq::message_t(), zmq::send_flags::sndmore);
      dealer.send(zmq::buffer(start, 8), zmq::send_flags::none);
      const auto deadline = std::chrono::steady_clock::now() + options.replay_timeout;
      while (next < upto && !stop.load(std::memory_order_acquire)) {
        const auto now = std::chrono::steady_clock::now();
        if (now >= deadline) break;
        auto wait = std::min(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now),
                             options.poll_interval);
        zmq::pollitem_t item{dealer.handle(), 0, ZMQ_POLLIN, 0};
        zmq::poll(&item, 1, std::max(wait, std::chrono::milliseconds(1)));
        if ((item.revents & ZMQ_POLLIN) == 0) continue;
        std::vector<zmq::message_t> frames;
        if (!zmq::recv_multipart(dealer, std::back_inserter(frames), zmq::recv_flags::dontwait)) {
          continue;
        }
        if (frames.size() != 3 || frames[0].size() != 0 || frames[1].size() != 8) {
          Bump(malformed);
          continue;
        }
        const std::uint64_t seq = GetBigEndian64(frames[1].data());
        if (seq == kReplayEndSeq) break;
        if (seq < next) continue;  // older than the gap (the request starts at `from`)
        if (seq > next) break;     // evicted from the engine's buffer: cannot be closed
        if (!DecodeAndDeliver(seq, frames[2].data<std::uint8_t>(), frames[2].size(), true)) break;
        ++next;
      }
    } catch (const zmq::error_t&) {
      // What was delivered stays delivered; the rest is reported as lost.
    }
    return next == upto;
  }
};

std::expected<std::unique_ptr<ZmqEventSubscriber>, std::string> ZmqEventSubscriber::Create(
    ZmqSubscriberOptions options, SubscriberCallbacks callbacks) {
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->callbacks = std::move(callbacks);
  if (impl->options.resume_after) {
    // As if resume_after had been delivered: the first gap is repaired from the batch after.
    impl->have_last = true;
    impl->last = *impl->options.resume_after;
  }
  const ZmqSubscriberOptions& o = impl->options;
  std::string endpoint;
  try {
    impl->sub = zmq::socket_t(impl->ctx, zmq::socket_type::sub);
    impl->sub.set(zmq::sockopt::rcvhwm, o.rcvhwm);
    impl->sub.set(zmq::sockopt::linger, 0);
    impl->sub.set(zmq::sockopt::subscribe, o.topic);
    if (SubscriberBinds(o)) {
      impl->sub.bind(o.endpoint);
    } else {
      impl->sub.connect(o.endpoint);
    }
    endpoint = impl->sub.get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    return std::unexpected("kv event subscriber on " + o.endpoint + ": " + e.what());
  }
  std::unique_ptr<ZmqEventSubscriber> s(new ZmqEventSubscriber(std::move(impl)));
  s->endpoint_ = std::move(endpoint);
  s->thread_ = std::thread([raw = s->impl_.get()] { raw->Run(); });
  return s;
}

ZmqEventSubscriber::ZmqEventSubscriber(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ZmqEventSubscriber::~ZmqEventSubscriber() { Stop(); }

void ZmqEventSubscriber::Stop() {
  impl_->stop.store(true, std::memory_order_release);
  if (thread_.joinable()) thread_.join();
}

ZmqSubscriberStats ZmqEventSubscriber::stats() const {
  const Impl& i = *impl_;
  auto get = [](const std::atomic<std::uint64_t>& c) { return c.load(std::memory_order_relaxed); };
  return ZmqSubscriberStats{
      .messages = get(i.messages),
      .batches = get(i.batches),
      .events = get(i.events),
      .malformed = get(i.malformed),
      .gaps = get(i.gaps),
      .replayed = get(i.replayed),
      .stale_episodes = get(i.stale_episodes),
      .restarts = get(i.restarts),
      .unknown_events = get(i.unknown_events),
  };
}

}  // namespace kvroute::kv

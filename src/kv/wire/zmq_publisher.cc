#include "kv/wire/zmq_publisher.h"

#include <optional>
#include <utility>
#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

namespace kvroute::kv {
namespace {

void PutBigEndian64(std::uint64_t v, std::uint8_t out[8]) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<std::uint8_t>(v >> (56 - 8 * i));
}

std::uint64_t GetBigEndian64(const void* data) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

bool EngineBindsEndpoint(std::string_view endpoint) {
  return endpoint.find('*') != std::string_view::npos ||
         endpoint.find("::") != std::string_view::npos || endpoint.starts_with("ipc://") ||
         endpoint.starts_with("inproc://");
}

// Everything only the publisher thread touches after Create().
struct ZmqEventPublisher::Impl {
  ZmqPublisherOptions options;
  zmq::context_t ctx{1};
  zmq::socket_t pub;
  std::optional<zmq::socket_t> router;
  std::deque<std::pair<std::uint64_t, std::vector<std::uint8_t>>> replay_buffer;
  std::uint64_t next_seq = 0;
};

std::expected<std::unique_ptr<ZmqEventPublisher>, std::string> ZmqEventPublisher::Create(
    ZmqPublisherOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  const ZmqPublisherOptions& o = impl->options;
  std::string endpoint;
  std::string replay_endpoint;
  try {
    impl->pub = zmq::socket_t(impl->ctx, zmq::socket_type::pub);
    impl->pub.set(zmq::sockopt::sndhwm, o.hwm);
    impl->pub.set(zmq::sockopt::linger, 0);  // raised to the flush budget at shutdown
    if (EngineBindsEndpoint(o.endpoint)) {
      impl->pub.bind(o.endpoint);
    } else {
      impl->pub.connect(o.endpoint);
    }
    endpoint = impl->pub.get(zmq::sockopt::last_endpoint);
    if (!o.replay_endpoint.empty()) {
      impl->router.emplace(impl->ctx, zmq::socket_type::router);
      // A full replay is buffer_steps + 1 messages to one peer: let the ROUTER queue them all
      // instead of silently dropping past the default HWM of 1000.
      impl->router->set(zmq::sockopt::sndhwm, static_cast<int>(o.buffer_steps) + 16);
      impl->router->set(zmq::sockopt::linger, 0);
      impl->router->bind(o.replay_endpoint);  // always bound, as in vLLM
      replay_endpoint = impl->router->get(zmq::sockopt::last_endpoint);
    }
  } catch (const zmq::error_t& e) {
    return std::unexpected("kv event publisher on " + o.endpoint + ": " + e.what());
  }
  std::unique_ptr<ZmqEventPublisher> p(new ZmqEventPublisher(std::move(impl)));
  p->endpoint_ = std::move(endpoint);
  p->replay_endpoint_ = std::move(replay_endpoint);
  p->thread_ = std::thread([raw = p.get()] { raw->Run(); });
  return p;
}

ZmqEventPublisher::ZmqEventPublisher(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)), max_queue_size_(impl_->options.max_queue_size) {}

ZmqEventPublisher::~ZmqEventPublisher() { Shutdown(); }

bool ZmqEventPublisher::Publish(KvEventBatch batch) {
  if (!batch.data_parallel_rank) batch.data_parallel_rank = 0;
  {
    std::lock_guard lock(mu_);
    if (stopping_ || queue_.size() >= max_queue_size_) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    queue_.push_back(std::move(batch));
  }
  cv_.notify_one();
  return true;
}

void ZmqEventPublisher::Shutdown() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

ZmqPublisherStats ZmqEventPublisher::stats() const {
  return ZmqPublisherStats{
      .published = published_.load(std::memory_order_relaxed),
      .dropped_queue_full = dropped_.load(std::memory_order_relaxed),
      .replay_requests = replay_requests_.load(std::memory_order_relaxed),
      .send_errors = send_errors_.load(std::memory_order_relaxed),
  };
}

void ZmqEventPublisher::Run() {
  Impl& s = *impl_;
  const ZmqPublisherOptions& o = s.options;
  using Clock = std::chrono::steady_clock;

  auto send_one = [&](const KvEventBatch& batch) {
    const std::uint64_t seq = s.next_seq++;
    std::vector<std::uint8_t> payload = EncodeEventBatch(batch, o.encode);
    published_.fetch_add(1, std::memory_order_relaxed);
    if (!o.drop_on_wire_for_test || !o.drop_on_wire_for_test(seq)) {
      std::uint8_t seq_be[8];
      PutBigEndian64(seq, seq_be);
      try {
        // PUB never blocks: past the HWM ZeroMQ drops, which subscribers see as a gap.
        s.pub.send(zmq::buffer(o.topic), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
        s.pub.send(zmq::buffer(seq_be, 8), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
        s.pub.send(zmq::buffer(payload), zmq::send_flags::dontwait);
      } catch (const zmq::error_t&) {
        send_errors_.fetch_add(1, std::memory_order_relaxed);
      }
    }
    if (s.router) {
      s.replay_buffer.emplace_back(seq, std::move(payload));
      while (s.replay_buffer.size() > o.buffer_steps) s.replay_buffer.pop_front();
    }
  };

  auto serve_replay = [&] {
    // Bounded: at most 64 requests per wake-up so publishing is never starved.
    for (int i = 0; i < 64; ++i) {
      std::vector<zmq::message_t> req;
      try {
        if (!zmq::recv_multipart(*s.router, std::back_inserter(req), zmq::recv_flags::dontwait)) {
          return;
        }
      } catch (const zmq::error_t&) {
        return;
      }
      // vLLM ignores anything but [identity, "", start_seq].
      if (req.size() != 3 || req[1].size() != 0 || req[2].size() != 8) continue;
      replay_requests_.fetch_add(1, std::memory_order_relaxed);
      const std::uint64_t start = GetBigEndian64(req[2].data());
      const std::string identity = req[0].to_string();
      try {
        for (const auto& [seq, payload] : s.replay_buffer) {
          if (seq < start) continue;
          std::uint8_t seq_be[8];
          PutBigEndian64(seq, seq_be);
          s.router->send(zmq::buffer(identity), zmq::send_flags::sndmore);
          s.router->send(zmq::message_t(), zmq::send_flags::sndmore);
          s.router->send(zmq::buffer(seq_be, 8), zmq::send_flags::sndmore);
          s.router->send(zmq::buffer(payload), zmq::send_flags::none);
        }
        std::uint8_t end_be[8];
        PutBigEndian64(kReplayEndSeq, end_be);
        s.router->send(zmq::buffer(identity), zmq::send_flags::sndmore);
        s.router->send(zmq::message_t(), zmq::send_flags::sndmore);
        s.router->send(zmq::buffer(end_be, 8), zmq::send_flags::sndmore);
        s.router->send(zmq::message_t(), zmq::send_flags::none);
      } catch (const zmq::error_t&) {
        send_errors_.fetch_add(1, std::memory_order_relaxed);
      }
    }
  };

  // With a replay socket the thread wakes every 10 ms to poll it (vLLM polls every 100 ms);
  // batches wake it immediately through the condition variable.
  const auto idle_wait = s.router ? std::chrono::milliseconds(10) : std::chrono::milliseconds(100);
  std::optional<Clock::time_point> deadline;
  for (;;) {
    std::deque<KvEventBatch> work;
    bool stopping;
    {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, idle_wait, [&] { return stopping_ || !queue_.empty(); });
      work.swap(queue_);
      stopping = stopping_;
    }
    if (stopping && !deadline) deadline = Clock::now() + o.shutdown_timeout;
    for (const KvEventBatch& batch : work) {
      if (deadline && Clock::now() >= *deadline) {
        dropped_.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      send_one(batch);
    }
    if (s.router) serve_replay();
    if (stopping) break;  // Publish() refuses once stopping_ is set: the queue was final
  }
  // Give ZeroMQ what is left of the flush budget to put queued frames on the wire.
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now());
  const int linger_ms = static_cast<int>(std::max<std::int64_t>(0, left.count()));
  try {
    s.pub.set(zmq::sockopt::linger, linger_ms);
    s.pub.close();
    if (s.router) s.router->close();
    s.ctx.close();
  } catch (const zmq::error_t&) {
    // Closing cannot be retried; the context destructor finishes the job.
  }
}

}  // namespace kvroute::kv

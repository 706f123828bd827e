#include "gateway/replica_delta_publisher.h"

#include <random>

#include "gateway/replica_remote_bookings.h"

namespace kvroute::gateway {

std::uint64_t NewReplicaInstanceId() {
  std::random_device rd;
  std::uint64_t id = 0;
  while (id == 0) id = (std::uint64_t{rd()} << 32) ^ rd();
  return id;
}

DeltaPublisher::DeltaPublisher(DeltaPublisherOptions options, const fleet::RouterState* state,
                               std::uint64_t instance)
    : options_(options), state_(state), instance_(instance) {}

DeltaPublisher::~DeltaPublisher() { Stop(); }

void DeltaPublisher::Start() {
  std::lock_guard lock(mu_);
  if (flusher_.joinable() || stop_) return;
  last_frame_ = std::chrono::steady_clock::now();
  flusher_ = std::thread([this] { Run(); });
}

void DeltaPublisher::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stop_) return;
    stop_ = true;
    FlushLocked();  // what is pending still goes out before the end
    for (auto& q : queues_) q->Close();
    queues_.clear();
  }
  cv_.notify_all();
  if (flusher_.joinable()) flusher_.join();
}

std::optional<std::string> DeltaPublisher::NameOf(WorkerId worker) const {
  std::optional<std::string> name;
  state_->VisitSpec(worker, [&](const fleet::WorkerSpec& s) { name = s.name; });
  return name;
}

void DeltaPublisher::OnBooked(RequestId id, const fleet::RoutedRequest& booking) {
  if (IsRemoteBookingId(id)) return;
  auto name = NameOf(booking.worker);  // outside mu_: the table's lock, taken shared
  if (!name) return;
  BookedDelta d{.id = id,
                .worker = std::move(*name),
                .prompt_tokens = booking.prompt_tokens,
                .uncached_tokens = booking.uncached_tokens,
                .kv_blocks = booking.kv_blocks};
  std::lock_guard lock(mu_);
  if (stop_) return;
  AppendLocked(d);
  live_.insert_or_assign(id, std::move(d));
}

void DeltaPublisher::OnFirstToken(RequestId id) {
  std::lock_guard lock(mu_);
  auto it = live_.find(id);
  if (it == live_.end() || it->second.first_token_seen) return;
  it->second.first_token_seen = true;
  AppendLocked(FirstTokenDelta{id});
}

void DeltaPublisher::OnReleased(RequestId id) {
  std::lock_guard lock(mu_);
  if (live_.erase(id) == 0) return;
  AppendLocked(ReleasedDelta{id});
}

void DeltaPublisher::OnPredicted(WorkerId worker, std::span<const kv::BlockKey> keys) {
  if (keys.empty()) return;
  {
    std::lock_guard lock(mu_);
    if (queues_.empty()) return;  // not replayed: nobody to tell
  }
  auto name = NameOf(worker);
  if (!name) return;
  const std::size_t n = std::min(keys.size(), kMaxPredictedKeys);
  PredictedDelta d{.worker = std::move(*name),
                   .keys = std::vector<kv::BlockKey>(keys.begin(), keys.begin() + n)};
  std::lock_guard lock(mu_);
  AppendLocked(d);
}

void DeltaPublisher::AppendLocked(const Delta& delta) {
  if (queues_.empty() || stop_) return;  // a future subscriber gets the live table instead
  const bool first = pending_count_ == 0;
  AppendDelta(delta, &pending_);
  ++pending_count_;
  if (first || pending_count_ >= options_.max_pending) cv_.notify_all();
}

void DeltaPublisher::FlushLocked() {
  if (pending_count_ == 0) return;
  std::string frame;
  AppendFrame(pending_, &frame);
  pending_.clear();
  pending_count_ = 0;
  last_frame_ = std::chrono::steady_clock::now();
  // A cut subscriber (too far behind, or gone) refuses the piece and leaves the list.
  std::erase_if(queues_, [&](const std::shared_ptr<net::ChunkQueue>& q) {
    return !q->Push(frame);
  });
}

void DeltaPublisher::Run() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, options_.heartbeat, [&] { return stop_ || pending_count_ > 0; });
    if (stop_) break;
    if (pending_count_ > 0) {
      // Batch: what arrives within the flush interval goes out in the same frame.
      cv_.wait_for(lock, options_.flush_interval,
                   [&] { return stop_ || pending_count_ >= options_.max_pending; });
      if (stop_) break;
      FlushLocked();
    } else if (std::chrono::steady_clock::now() - last_frame_ >= options_.heartbeat) {
      std::string heartbeat;
      AppendFrame({}, &heartbeat);
      last_frame_ = std::chrono::steady_clock::now();
      std::erase_if(queues_, [&](const std::shared_ptr<net::ChunkQueue>& q) {
        return !q->Push(heartbeat);
      });
    }
  }
}

std::shared_ptr<net::ChunkQueue> DeltaPublisher::Subscribe() {
  auto q = std::make_shared<net::ChunkQueue>(std::function<void()>{},
                                              options_.max_buffered_bytes);
  std::lock_guard lock(mu_);
  if (stop_) {
    q->Close();
    return q;
  }
  FlushLocked();  // the others' pending deltas are already in the replay below
  std::string payload;
  AppendDelta(HelloDelta{.instance = instance_}, &payload);
  for (const auto& [id, d] : live_) AppendDelta(d, &payload);
  std::string frame;
  AppendFrame(payload, &frame);
  q->Push(std::move(frame));
  queues_.push_back(q);
  return q;
}

std::size_t DeltaPublisher::subscribers() const {
  std::lock_guard lock(mu_);
  return queues_.size();
}

std::size_t DeltaPublisher::live() const {
  std::lock_guard lock(mu_);
  return live_.size();
}

}  // namespace kvroute::gateway

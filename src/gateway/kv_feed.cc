#include "gateway/kv_feed.h"

#include <algorithm>
#include <atomic>

namespace kvroute::gateway {

// One worker's subscriber and the counters its callbacks update (on the subscriber thread).
struct KvFeed::Feed {
  std::unique_ptr<kv::ZmqEventSubscriber> subscriber;
  std::atomic<std::uint64_t> batches{0};
  std::atomic<std::uint64_t> events{0};
  std::atomic<std::uint64_t> blocks_stored{0};
  std::atomic<std::uint32_t> last_block_size{0};
  std::atomic<std::uint64_t> restarts{0};
  std::atomic<std::uint64_t> stale_episodes{0};
  std::atomic<std::uint64_t> resyncs{0};
  std::atomic<bool> stale{false};
  std::atomic<double> last_lag_s{0};
  std::atomic<double> max_lag_s{0};

  KvFeedCounters Read() const {
    KvFeedCounters c;
    c.batches = batches.load();
    c.events = events.load();
    c.blocks_stored = blocks_stored.load();
    c.last_block_size = last_block_size.load();
    c.restarts = restarts.load();
    c.stale_episodes = stale_episodes.load();
    c.resyncs = resyncs.load();
    c.stale = stale.load();
    c.last_lag_s = last_lag_s.load();
    c.max_lag_s = max_lag_s.load();
    if (subscriber) c.subscriber = subscriber->stats();
    return c;
  }
};

KvFeed::KvFeed(kv::KvIndex* index, KvFeedOptions options)
    : index_(index), options_(std::move(options)) {}

KvFeed::~KvFeed() {
  std::map<WorkerId, std::unique_ptr<Feed>> feeds;
  {
    std::lock_guard lock(mu_);
    feeds.swap(feeds_);
  }
  for (auto& [id, feed] : feeds) feed->subscriber->Stop();
}

std::expected<void, std::string> KvFeed::AddWorker(WorkerId worker, const KvEventSpec& spec,
                                                   std::string_view engine_host) {
  if (spec.endpoint.empty()) return std::unexpected("worker has no KV event endpoint");
  RemoveWorker(worker);  // a new stream: start from an empty view

  auto feed = std::make_unique<Feed>();
  Feed* f = feed.get();
  kv::KvIndex* index = index_;
  std::function<double()> wall = options_.wall_clock_s;
  if (!wall) {
    wall = [] {
      return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
          .count();
    };
  }
  kv::SubscriberCallbacks callbacks{
      .on_batch =
          [f, index, wall](WorkerId w, std::uint64_t seq, const kv::KvEventBatch& batch) {
            index->ApplyBatch(w, batch, seq);  // the index records seq with the blocks
            f->batches.fetch_add(1);
            f->events.fetch_add(batch.events.size());
            // Per-worker parity needs what this worker stores and in which block size.
            std::uint64_t stored = 0;
            for (const auto& e : batch.events) {
              if (const auto* s = std::get_if<kv::BlockStored>(&e)) {
                stored += s->block_hashes.size();
                f->last_block_size.store(s->block_size);
              }
            }
            if (stored > 0) f->blocks_stored.fetch_add(stored);
            if (batch.ts > 0) {
              double lag = std::max(0.0, wall() - batch.ts);
              f->last_lag_s.store(lag);
              double prev = f->max_lag_s.load();
              while (lag > prev && !f->max_lag_s.compare_exchange_weak(prev, lag)) {
              }
            }
          },
      .on_restart =
          [f, index](WorkerId w) {
            index->RemoveWorker(w);
            f->restarts.fetch_add(1);
          },
      .on_stale =
          [f, index](WorkerId w, bool stale) {
            if (stale) {
              index->MarkStale(w);
              if (!f->stale.exchange(true)) f->stale_episodes.fetch_add(1);
            } else {
              index->ClearStale(w);
              if (f->stale.exchange(false)) f->resyncs.fetch_add(1);
            }
          },
  };
  kv::SubscriberEndpoint sub = kv::SubscriberEndpointFor(spec.endpoint, engine_host);
  kv::ZmqSubscriberOptions so{
      .worker = worker,
      .endpoint = sub.endpoint,
      .mode = sub.mode,
      .replay_endpoint = spec.replay_endpoint.empty()
                             ? std::string()
                             : kv::ReplayEndpointFor(spec.replay_endpoint, engine_host),
      .topic = spec.topic,
      .replay_timeout = options_.replay_timeout,
      .poll_interval = options_.poll_interval,
      // What the index holds of this worker already (merged from a sibling's snapshot): the
      // stream resumes after it, so the first gap repair replays only what the image lacks.
      .resume_after = index_->AppliedSeq(worker),
  };
  auto created = kv::ZmqEventSubscriber::Create(std::move(so), std::move(callbacks));
  if (!created) return std::unexpected(created.error());
  feed->subscriber = std::move(*created);
  std::lock_guard lock(mu_);
  feeds_[worker] = std::move(feed);
  return {};
}

void KvFeed::RemoveWorker(WorkerId worker) {
  std::unique_ptr<Feed> feed;
  {
    std::lock_guard lock(mu_);
    auto it = feeds_.find(worker);
    if (it == feeds_.end()) return;
    feed = std::move(it->second);
    feeds_.erase(it);
  }
  feed->subscriber->Stop();  // no callback runs after this, so the removal below is final
  index_->RemoveWorker(worker);
}

std::optional<std::string> KvFeed::Endpoint(WorkerId worker) const {
  std::lock_guard lock(mu_);
  auto it = feeds_.find(worker);
  if (it == feeds_.end()) return std::nullopt;
  return it->second->subscriber->endpoint();
}

std::optional<KvFeedCounters> KvFeed::Counters(WorkerId worker) const {
  std::lock_guard lock(mu_);
  auto it = feeds_.find(worker);
  if (it == feeds_.end()) return std::nullopt;
  return it->second->Read();
}

std::map<WorkerId, KvFeedCounters> KvFeed::AllCounters() const {
  std::lock_guard lock(mu_);
  std::map<WorkerId, KvFeedCounters> out;
  for (const auto& [id, feed] : feeds_) out.emplace(id, feed->Read());
  return out;
}

}  // namespace kvroute::gateway

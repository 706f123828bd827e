#include "store/store_client.h"

#include <boost/json.hpp>
#include <optional>

#include "client/blocking_http_client.h"
#include "store/store_wire.h"

namespace kvroute::store {
namespace {

client::ClientRequest Post(const HttpSharedStoreOptions& o, std::string target, std::string body) {
  client::ClientRequest r;
  r.method = "POST";
  r.host = o.host;
  r.port = o.port;
  r.target = std::move(target);
  r.body = std::move(body);
  r.content_type = "application/json";
  r.timeouts = client::Timeouts{
      .connect = o.timeout, .first_byte = o.timeout, .idle = o.timeout, .total = o.timeout};
  return r;
}

}  // namespace

HttpSharedStore::HttpSharedStore(HttpSharedStoreOptions options)
    : options_(std::move(options)), client_(std::make_unique<client::BlockingHttpClient>()) {
  thread_ = std::thread([this] { Run(); });
}

HttpSharedStore::~HttpSharedStore() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::size_t HttpSharedStore::Match(std::span<const kv::EngineHash> hashes, Nanos) {
  if (hashes.empty()) return 0;
  ++matches_;
  auto r = client_->Send(Post(options_, "/v1/kv/match", EncodeMatch(hashes)));
  if (!r || r->status != 200) {
    ++match_failures_;
    return 0;
  }
  boost::system::error_code ec;
  const boost::json::value v = boost::json::parse(r->body, ec);
  const boost::json::value* n = (!ec && v.is_object()) ? v.as_object().if_contains("matched") : nullptr;
  if (n == nullptr || !n->is_number()) {
    ++match_failures_;
    return 0;
  }
  const auto matched = n->to_number<std::uint64_t>();
  return matched > hashes.size() ? hashes.size() : static_cast<std::size_t>(matched);
}

bool HttpSharedStore::Enqueue(std::string target, std::string body) {
  {
    std::lock_guard lock(mu_);
    if (queue_.size() >= options_.max_queued_puts) {
      ++puts_dropped_;
      return false;
    }
    queue_.push_back(Queued{.target = std::move(target), .body = std::move(body)});
  }
  cv_.notify_one();
  return true;
}

void HttpSharedStore::Put(std::span<const engine::BlockMeta> blocks, Nanos) {
  if (blocks.empty()) return;
  Enqueue("/v1/kv/put", EncodePut(blocks, options_.block_size, options_.block_bytes));
}

std::uint64_t HttpSharedStore::Lease(std::span<const kv::EngineHash> hashes, Nanos) {
  if (hashes.empty()) return 0;
  auto r = client_->Send(Post(options_, "/v1/kv/lease", EncodeMatch(hashes)));
  std::optional<LeaseReply> reply;
  if (r && r->status == 200) {
    if (auto decoded = DecodeLeaseReply(r->body)) reply = *decoded;
  }
  if (!reply) {
    ++lease_failures_;
    return 0;
  }
  if (reply->lease != 0) ++leases_;
  return reply->lease;
}

void HttpSharedStore::Release(std::uint64_t lease_id, Nanos) {
  // A release lost to a full queue or a down store only lets the lease run to its TTL.
  if (lease_id != 0) Enqueue("/v1/kv/release", EncodeRelease(lease_id));
}

void HttpSharedStore::Run() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping and drained
    Queued q = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    auto r = client_->Send(Post(options_, std::move(q.target), std::move(q.body)));
    ++put_batches_;
    if (!r || r->status != 200) ++put_failures_;
    lock.lock();
  }
}

HttpSharedStoreCounters HttpSharedStore::counters() const {
  return {.matches = matches_, .match_failures = match_failures_, .put_batches = put_batches_,
          .put_failures = put_failures_, .puts_dropped = puts_dropped_, .leases = leases_,
          .lease_failures = lease_failures_};
}

}  // namespace kvroute::store

#include "sim/kv_puller.h"

#include <spdlog/spdlog.h>

#include <boost/json/array.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

namespace kvroute::sim {
namespace {

client::ClientOptions ClientOptionsFor(std::chrono::milliseconds timeout) {
  client::ClientOptions o;
  o.timeouts.connect = timeout;
  o.timeouts.first_byte = timeout;
  o.timeouts.idle = timeout;
  o.timeouts.total = timeout;
  o.max_idle_per_origin = 4;
  return o;
}

// The prefill side's {"error": ...} text, or the body itself.
std::string ErrorText(const std::string& body) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(body, ec);
  if (!ec && v.is_object()) {
    if (const auto* e = v.as_object().if_contains("error"); e && e->is_string()) {
      return std::string(e->get_string());
    }
  }
  return body;
}

std::string Where(const DecodeLegParams& p) {
  return p.remote_host + ":" + std::to_string(p.remote_port);
}

}  // namespace

KvPuller::KvPuller(KvPullerOptions options)
    : options_(std::move(options)), http_(ClientOptionsFor(options_.timeout)) {
  thread_ = std::thread([this] { Run(); });
}

KvPuller::~KvPuller() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::size_t KvPuller::claims_held() const {
  std::lock_guard lock(mu_);
  return claims_.size();
}

bool KvPuller::Enqueue(std::function<void()> job) {
  {
    std::lock_guard lock(mu_);
    if (stop_ || jobs_.size() >= options_.max_queued) return false;
    jobs_.push_back(std::move(job));
  }
  cv_.notify_all();
  return true;
}

void KvPuller::Run() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
      // At stop, queued jobs still run (releases free prefill blocks); each is bounded.
      if (jobs_.empty()) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

std::expected<client::ClientResponse, client::ClientError> KvPuller::Post(
    const DecodeLegParams& to, const std::string& path, std::string body) {
  client::ClientRequest r;
  r.method = "POST";
  r.host = to.remote_host;
  r.port = static_cast<std::uint16_t>(to.remote_port);
  r.target = path;
  r.body = std::move(body);
  r.content_type = "application/json";
  return http_.Send(std::move(r));
}

void KvPuller::Claim(std::string local_id, DecodeLegParams params,
                     std::uint32_t num_prompt_tokens, ClaimDone done) {
  auto shared_done = std::make_shared<ClaimDone>(std::move(done));
  const bool queued = Enqueue([this, local_id, params, num_prompt_tokens, shared_done] {
    boost::json::array ids;
    for (std::int32_t id : params.remote_block_ids) ids.emplace_back(id);
    const std::string body = boost::json::serialize(boost::json::object{
        {"engine_id", params.remote_engine_id},
        {"request_id", params.remote_request_id},
        {"block_ids", std::move(ids)},
        {"num_prompt_tokens", num_prompt_tokens},
        {"block_size", options_.block_size},
    });
    auto response = Post(params, "/kv/claim", body);
    if (!response) {
      if (options_.metrics) options_.metrics->failed_transfers.Increment();
      spdlog::warn("P/D: claim for {} failed: prefill engine at {} unreachable: {}", local_id,
                   Where(params), response.error().text);
      (*shared_done)(std::unexpected(api::ApiError::Overloaded(
          "The prefill engine at " + Where(params) + " that holds this request's KV is "
          "unreachable (" + std::string(client::ErrorKindName(response.error().kind)) + ": " +
          response.error().text + ").")));
      return;
    }
    if (response->status != 200) {
      if (options_.metrics) options_.metrics->failed_transfers.Increment();
      (*shared_done)(std::unexpected(api::ApiError::InvalidRequest(
          "Invalid kv_transfer_params: the prefill engine at " + Where(params) +
              " refused the KV pull: " + ErrorText(response->body) + ".",
          "kv_transfer_params")));
      return;
    }
    {
      std::lock_guard lock(mu_);
      claims_[local_id] = params;
    }
    (*shared_done)({});
  });
  if (!queued) {
    (*shared_done)(std::unexpected(
        api::ApiError::Overloaded("Too many KV pulls are queued on this decode engine.")));
  }
}

void KvPuller::Release(const std::string& local_id, std::uint32_t blocks_read) {
  DecodeLegParams params;
  {
    std::lock_guard lock(mu_);
    auto it = claims_.find(local_id);
    if (it == claims_.end()) return;
    params = std::move(it->second);
    claims_.erase(it);
  }
  const bool queued = Enqueue([this, local_id, params, blocks_read] {
    const std::string body = boost::json::serialize(boost::json::object{
        {"engine_id", params.remote_engine_id},
        {"request_id", params.remote_request_id},
        {"blocks_read", blocks_read},
    });
    auto response = Post(params, "/kv/release", body);
    if (!response || response->status != 200) {
      // The prefill sim frees the blocks at its timeout anyway.
      if (options_.metrics) options_.metrics->failed_notifications.Increment();
      spdlog::warn("P/D: release of {} at {} failed: {}", local_id, Where(params),
                   response ? ErrorText(response->body) : response.error().text);
    }
  });
  if (!queued && options_.metrics) options_.metrics->failed_notifications.Increment();
}

}  // namespace kvroute::sim

// KvPuller: the decode side of kvroute sim's P/D control path (side_channel.h is the other
// end). Before a decode leg enters the engine it claims the prefill's pinned blocks from
// the prefill sim named by its kv_transfer_params; when the engine reports the (modelled)
// transfer done, or the request ends first, it tells the prefill sim to free them.
//
// Claims and releases run on one agent thread of its own, never on an HTTP or the engine
// thread: a dead or slow prefill sim costs that thread at most the timeout (connection
// refused returns at once, which is what makes a decode leg fail fast). Jobs queue with a
// bound; a full queue refuses a claim (503) and drops a release (counted as a failed
// notification; the prefill's timeout frees the blocks).
//
// Errors a claim can end with (what the client sees, OpenAI-style):
//   400 invalid_request  the prefill engine holds no such KV or it does not match the prompt
//                        (its answer quoted), or the block size differs
//   503 (Overloaded)     the prefill engine cannot be reached: "prefill engine at h:p is
//                        unreachable: <why>"
//
// Ownership: owns its thread and HTTP client. Thread safety: every method from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <expected>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "api/api_error.h"
#include "client/blocking_http_client.h"
#include "sim/kv_transfer_params.h"
#include "sim/pd_metrics.h"

namespace kvroute::sim {

struct KvPullerOptions {
  std::uint32_t block_size = 16;       // this engine's; the prefill's must match
  std::chrono::milliseconds timeout{3000};  // connect / answer bound per message
  std::size_t max_queued = 1024;
  PdMetrics* metrics = nullptr;  // failed_transfers / failed_notifications; may be null
};

class KvPuller {
 public:
  explicit KvPuller(KvPullerOptions options);
  ~KvPuller();  // finishes queued releases (each bounded by the timeout), then stops
  KvPuller(const KvPuller&) = delete;
  KvPuller& operator=(const KvPuller&) = delete;

  using ClaimDone = std::function<void(std::expected<void, api::ApiError>)>;
  // Claims the blocks `params` name for local request `local_id` (prompt of
  // `num_prompt_tokens`). `done` runs on the agent thread. On success the claim is
  // remembered until Release(local_id).
  void Claim(std::string local_id, DecodeLegParams params, std::uint32_t num_prompt_tokens,
             ClaimDone done);
  // Tells the prefill engine to free what `local_id` claimed; no-op if nothing is claimed
  // under it (so calling it again, or for a request that never claimed, is harmless).
  void Release(const std::string& local_id, std::uint32_t blocks_read);

  // Claims held and not yet released (tests).
  std::size_t claims_held() const;

 private:
  void Run();
  bool Enqueue(std::function<void()> job);
  std::expected<client::ClientResponse, client::ClientError> Post(const DecodeLegParams& to,
                                                                  const std::string& path,
                                                                  std::string body);

  const KvPullerOptions options_;
  client::BlockingHttpClient http_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  // Guarded by mu_.
  std::deque<std::function<void()>> jobs_;
  std::map<std::string, DecodeLegParams> claims_;
  bool stop_ = false;

  std::thread thread_;  // last: started after everything above exists
};

}  // namespace kvroute::sim

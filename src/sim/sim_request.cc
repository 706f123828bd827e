#include "sim/sim_request.h"

#include <boost/json/serialize.hpp>

#include "api/api_error.h"
#include "api/sse_writer.h"

namespace kvroute::sim {

const char* FinishReasonName(engine::FinishReason reason) {
  switch (reason) {
    case engine::FinishReason::kStop:
      return "stop";
    case engine::FinishReason::kLength:
      return "length";
    case engine::FinishReason::kAbort:
      return "abort";
  }
  return "stop";
}

SimRequest::SimRequest(SimRequestInfo info, tokenize::TokenizerPtr tokenizer,
                       telemetry::VllmMetrics* metrics, std::shared_ptr<net::ChunkQueue> queue,
                       std::shared_ptr<net::DeferredSlot> slot)
    : info_(std::move(info)),
      tokenizer_(std::move(tokenizer)),
      metrics_(metrics),
      queue_(std::move(queue)),
      slot_(std::move(slot)),
      encoder_(info_.endpoint, info_.meta, info_.stream_options, info_.prompt_tokens) {}

std::string SimRequest::TokenText(TokenId token) const {
  auto text = tokenizer_->Decode({token});
  return text ? std::move(*text) : std::string();
}

void SimRequest::OnToken(const engine::TokenEvent& event, Nanos at) {
  std::string text = TokenText(event.token);
  ++completion_tokens_;
  if (event.is_first) {
    first_token_at_ = at;
    cached_tokens_ = event.cached_tokens;
    if (metrics_) metrics_->time_to_first_token.Observe(ToSeconds(at - info_.arrival));
    if (queue_) queue_->Push(encoder_.Start());
  } else if (metrics_) {
    metrics_->inter_token_latency.Observe(ToSeconds(at - last_token_at_));
  }
  last_token_at_ = at;
  if (!event.finished) {
    if (queue_) {
      queue_->Push(encoder_.Delta(text, completion_tokens_));
    } else {
      text_ += text;
    }
    return;
  }
  std::string reason = FinishReasonName(*event.finished);
  api::Finish finish{.reason = reason, .stop_string = std::nullopt};
  if (queue_) {
    queue_->Push(encoder_.End(text, completion_tokens_, finish, cached_tokens_));
    queue_->Close();
  } else {
    text_ += text;
    api::Usage usage{.prompt_tokens = info_.prompt_tokens,
                     .completion_tokens = completion_tokens_,
                     .cached_tokens = cached_tokens_};
    // A prefill leg that pinned its blocks names them for the decoder (vLLM's
    // request_finished); one that did not (nothing to hand over) answers without.
    std::optional<boost::json::object> kv;
    if (info_.prefill_identity && !event.pinned_block_ids.empty()) {
      kv = PrefillResponseParams(*info_.prefill_identity, event.pinned_block_ids,
                                 event.request_id);
    }
    const boost::json::object* kv_ptr = kv ? &*kv : nullptr;
    boost::json::object body =
        info_.endpoint == api::Endpoint::kChatCompletions
            ? api::ChatCompletionResponseJson(info_.meta, text_, finish, usage, kv_ptr)
            : api::CompletionResponseJson(info_.meta, text_, finish, usage, kv_ptr);
    slot_->Set(net::JsonResponse(200, boost::json::serialize(body)));
  }
  if (info_.puller != nullptr) info_.puller->Release(event.request_id, 0);
  Finish(reason, at);
}

void SimRequest::OnEnded(const std::string& error, Nanos at) {
  // A decode leg that ends before its KV arrived still frees the prefill's blocks (vLLM
  // notifies the prefiller with an empty read for an aborted request).
  if (info_.puller != nullptr) info_.puller->Release(info_.meta.id, 0);
  if (!error.empty()) {
    // The engine refused the request (the HTTP layer checks the context length first, so this
    // is rare): a 400, in-stream for a stream that already started, as vLLM does.
    api::ApiError e = api::ApiError::InvalidRequest(error);
    if (queue_) {
      queue_->Push(api::SseJson(e.ToVllmJson()));
      queue_->Push(std::string(api::kSseDone));
      queue_->Close();
    } else {
      slot_->Set(net::JsonResponse(e.status, boost::json::serialize(e.ToVllmJson())));
    }
    if (metrics_) metrics_->RequestSuccess("error").Increment();
    return;
  }
  // Aborted (client gone, or the server cut it at shutdown).
  if (queue_) {
    queue_->Close();
  } else {
    api::ApiError e = api::ApiError::ShuttingDown();
    slot_->Set(net::JsonResponse(e.status, boost::json::serialize(e.ToVllmJson())));
  }
  Finish("abort", at);
}

void SimRequest::Finish(const std::string& reason, Nanos at) {
  if (metrics_ == nullptr) return;
  metrics_->RequestSuccess(reason).Increment();
  metrics_->e2e_request_latency.Observe(ToSeconds(at - info_.arrival));
  metrics_->request_prompt_tokens.Observe(static_cast<double>(info_.prompt_tokens));
  metrics_->request_generation_tokens.Observe(static_cast<double>(completion_tokens_));
  metrics_->request_params_max_tokens.Observe(static_cast<double>(info_.max_tokens));
  if (completion_tokens_ > 0) {
    metrics_->request_decode_time.Observe(ToSeconds(last_token_at_ - first_token_at_));
  }
  if (completion_tokens_ > 1) {
    metrics_->request_time_per_output_token.Observe(ToSeconds(last_token_at_ - first_token_at_) /
                                                    static_cast<double>(completion_tokens_ - 1));
  }
}

}  // namespace kvroute::sim

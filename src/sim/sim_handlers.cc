#include "sim/sim_handlers.h"

#include <boost/json/serialize.hpp>
#include <chrono>
#include <random>

#include "api/api_error.h"
#include "api/chat_request.h"
#include "api/completion_request.h"
#include "api/context_length.h"
#include "api/responses.h"
#include "api/sse_writer.h"
#include "api/tokenize_api.h"
#include "net/body_queue.h"
#include "sim/debug_cache.h"
#include "sim/sim_request.h"
#include "telemetry/prometheus_text.h"

namespace kvroute::sim {
namespace {

using net::HandlerResult;
using net::HttpRequest;

net::HttpResponse ErrorResponse(const api::ApiError& e) {
  return net::JsonResponse(e.status, boost::json::serialize(e.ToVllmJson()));
}

std::int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string NewResponseId(std::string_view prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uint64_t hi = rng();
  std::uint64_t lo = rng();
  return api::MakeResponseId(prefix, hi, lo);
}

std::expected<void, api::ApiError> CheckTokenIds(const std::vector<TokenId>& ids,
                                                 const tokenize::Tokenizer& tokenizer,
                                                 std::string_view param) {
  for (TokenId id : ids) {
    if (id >= tokenizer.VocabSize()) {
      return std::unexpected(api::ApiError::InvalidRequest(
          "Token id " + std::to_string(id) + " is out of vocabulary", std::string(param)));
    }
  }
  return {};
}

// The request as the engine will see it, after parsing, the model check and tokenization.
struct Admitted {
  api::GenerationParams params;
  std::vector<TokenId> prompt;
  std::string lora_name;           // the adapter the request named, if any
  std::vector<kv::MmItem> images;  // each image's identifier and placeholder tokens
};

// --lora-modules entries are NAME=PATH (vLLM's form) or NAME.
std::string_view AdapterName(std::string_view module) { return module.substr(0, module.find('=')); }
std::string_view AdapterPath(std::string_view module) {
  const std::size_t eq = module.find('=');
  return eq == std::string_view::npos ? module : module.substr(eq + 1);
}

// The model check: the served model, or one of its adapters (then *lora_name is set).
std::expected<void, api::ApiError> CheckModel(const SimContext& ctx, const std::string& model,
                                              std::string* lora_name) {
  if (model == ctx.served_model_name) return {};
  for (const auto& m : ctx.lora_modules) {
    if (AdapterName(m) == model) {
      *lora_name = model;
      return {};
    }
  }
  return std::unexpected(api::ApiError::ModelNotFound(model));
}

std::expected<Admitted, api::ApiError> Admit(const SimContext& ctx, api::Endpoint endpoint,
                                             const HttpRequest& request) {
  Admitted out;
  if (endpoint == api::Endpoint::kCompletions) {
    auto parsed = api::ParseCompletionRequest(request.body);
    if (!parsed) return std::unexpected(parsed.error());
    out.params = std::move(parsed->params);
    if (auto ok = CheckModel(ctx, out.params.model, &out.lora_name); !ok) {
      return std::unexpected(ok.error());
    }
    if (auto* text = std::get_if<std::string>(&parsed->prompt)) {
      out.prompt = ctx.tokenizer->Encode(*text, /*add_special_tokens=*/true);
    } else {
      out.prompt = std::move(std::get<std::vector<TokenId>>(parsed->prompt));
      if (auto ok = CheckTokenIds(out.prompt, *ctx.tokenizer, "prompt"); !ok) {
        return std::unexpected(ok.error());
      }
    }
  } else {
    auto parsed = api::ParseChatCompletionRequest(
        request.body,
        api::ImageOptions{.accept = true, .placeholder = ctx.image_tokens.placeholder});
    if (!parsed) return std::unexpected(parsed.error());
    out.params = std::move(parsed->params);
    if (auto ok = CheckModel(ctx, out.params.model, &out.lora_name); !ok) {
      return std::unexpected(ok.error());
    }
    auto ids = ctx.tokenizer->EncodeChat(parsed->chat);
    if (!ids) return std::unexpected(api::ApiError::InvalidRequest(ids.error(), "messages"));
    out.prompt = std::move(*ids);
    // As vLLM's processor does: each image's placeholder becomes its embedding positions.
    auto spans = tokenize::ExpandImagePlaceholders(*ctx.tokenizer, ctx.image_tokens,
                                                   parsed->images.size(), &out.prompt);
    if (!spans) return std::unexpected(api::ApiError::InvalidRequest(spans.error(), "messages"));
    for (std::size_t i = 0; i < parsed->images.size(); ++i) {
      out.images.push_back({.identifier = std::move(parsed->images[i].identifier),
                            .offset = (*spans)[i].offset,
                            .length = (*spans)[i].length});
    }
  }
  if (out.prompt.empty()) {
    return std::unexpected(api::ApiError::InvalidRequest("The prompt cannot be empty.", "prompt"));
  }
  return out;
}

// Marks a request as a P/D leg (kv_transfer_params already validated).
std::expected<void, api::ApiError> ApplyKvTransfer(const PdContext& pd, bool stream,
                                                   const KvTransferRequest& kv,
                                                   engine::RequestSpec* spec,
                                                   SimRequestInfo* info) {
  if (kv.prefill_leg) {
    if (!pd.config.CanProduce()) {
      return std::unexpected(api::ApiError::InvalidRequest(
          "This engine's kv_role is kv_consumer: it cannot serve a prefill leg "
          "(do_remote_decode).", "kv_transfer_params"));
    }
    if (stream) {
      return std::unexpected(api::ApiError::InvalidRequest(
          "A prefill leg (do_remote_decode) cannot be streamed: its kv_transfer_params come "
          "in the final response.", "stream"));
    }
    spec->remote_decode = true;
    info->prefill_identity = pd.identity;
  }
  if (kv.decode) {
    if (!pd.config.CanConsume()) {
      return std::unexpected(api::ApiError::InvalidRequest(
          "This engine's kv_role is kv_producer: it cannot serve a decode leg "
          "(do_remote_prefill).", "kv_transfer_params"));
    }
    spec->remote_prefill = engine::RequestSpec::RemotePrefill{.prefill_tp = kv.decode->tp_size};
    info->puller = pd.puller;
  }
  return {};
}

// Submits a streamed request; the response carries its chunk queue.
HandlerResult SubmitStreaming(const SimContext& ctx, engine::RequestSpec spec,
                              SimRequestInfo info) {
  EngineLoop* loop = ctx.loop;
  auto queue = std::make_shared<net::ChunkQueue>([loop, id = spec.id] { loop->Abort(id); });
  loop->Submit(std::move(spec), std::make_shared<SimRequest>(std::move(info), ctx.tokenizer,
                                                             ctx.metrics, queue, nullptr));
  net::HttpResponse response;
  response.content_type = "text/event-stream; charset=utf-8";
  response.headers.emplace_back("Cache-Control", "no-cache");
  response.stream = std::move(queue);
  return response;
}

// Submits a non-streamed request whose JSON answer goes into `slot`.
void SubmitInto(const SimContext& ctx, engine::RequestSpec spec, SimRequestInfo info,
                std::shared_ptr<net::DeferredSlot> slot) {
  ctx.loop->Submit(std::move(spec), std::make_shared<SimRequest>(std::move(info), ctx.tokenizer,
                                                                 ctx.metrics, nullptr,
                                                                 std::move(slot)));
}

HandlerResult Generate(const SimContext& ctx, api::Endpoint endpoint, const HttpRequest& request) {
  auto admitted = Admit(ctx, endpoint, request);
  if (!admitted) return ErrorResponse(admitted.error());
  api::GenerationParams& params = admitted->params;
  std::optional<std::int64_t> max_tokens = params.max_tokens;
  if (!max_tokens && endpoint == api::Endpoint::kCompletions) {
    max_tokens = api::kDefaultCompletionMaxTokens;
  }
  auto allowed = api::CheckContextLength(static_cast<std::int64_t>(admitted->prompt.size()),
                                         max_tokens, ctx.max_model_len);
  if (!allowed) return ErrorResponse(allowed.error());
  if (*allowed < 1) {
    return ErrorResponse(
        api::ApiError::InvalidRequest("max_tokens must be at least 1, got 0.", "max_tokens"));
  }

  std::string id =
      NewResponseId(endpoint == api::Endpoint::kChatCompletions ? api::kChatCompletionIdPrefix
                                                                : api::kCompletionIdPrefix);
  SimRequestInfo info{
      .endpoint = endpoint,
      .meta = {.id = id, .created = UnixNow(), .model = params.model},
      .stream = params.stream,
      .stream_options = params.stream_options,
      .prompt_tokens = static_cast<std::int64_t>(admitted->prompt.size()),
      .max_tokens = *allowed,
      .arrival = ctx.loop->Now(),
  };
  engine::RequestSpec spec{
      .id = id,
      .prompt = std::move(admitted->prompt),
      .max_tokens = static_cast<std::uint32_t>(*allowed),
      .ignore_eos = params.ignore_eos,
      .seed = params.seed ? static_cast<std::uint64_t>(*params.seed) : ctx.seed,
      .lora_name = std::move(admitted->lora_name),
      .cache_salt = params.cache_salt.value_or(""),
      .mm_items = std::move(admitted->images),
  };
  std::optional<DecodeLegParams> decode_leg;
  if (ctx.pd != nullptr) {
    auto kv = ParseKvTransferParams(params.kv_transfer_params);
    if (!kv) return ErrorResponse(kv.error());
    if (auto ok = ApplyKvTransfer(*ctx.pd, params.stream, *kv, &spec, &info); !ok) {
      return ErrorResponse(ok.error());
    }
    decode_leg = std::move(kv->decode);
  }
  EngineLoop* loop = ctx.loop;
  auto abort = [loop, id] { loop->Abort(id); };
  if (!decode_leg) {
    if (params.stream) return SubmitStreaming(ctx, std::move(spec), std::move(info));
    auto slot = std::make_shared<net::DeferredSlot>(abort);
    SubmitInto(ctx, std::move(spec), std::move(info), slot);
    return std::shared_ptr<net::DeferredResponse>(std::move(slot));
  }
  // Decode leg: claim the prefill's blocks first; the answer (a stream, a JSON body or an
  // error) is known once the claim returns.
  auto outer = std::make_shared<net::DeferredSlot>(abort);
  const std::uint32_t prompt_tokens = static_cast<std::uint32_t>(spec.prompt.size());
  auto pending = std::make_shared<std::pair<engine::RequestSpec, SimRequestInfo>>(
      std::move(spec), std::move(info));
  const SimContext c = ctx;
  ctx.pd->puller->Claim(id, std::move(*decode_leg), prompt_tokens,
                        [c, outer, pending, id](std::expected<void, api::ApiError> claimed) {
                          if (!claimed) {
                            outer->Set(ErrorResponse(claimed.error()));
                            return;
                          }
                          if (outer->cancelled()) {  // the client left while we claimed
                            c.pd->puller->Release(id, 0);
                            return;
                          }
                          if (pending->second.stream) {
                            auto r = SubmitStreaming(c, std::move(pending->first),
                                                     std::move(pending->second));
                            outer->Set(std::move(std::get<net::HttpResponse>(r)));
                          } else {
                            SubmitInto(c, std::move(pending->first), std::move(pending->second),
                                       outer);
                          }
                        });
  return std::shared_ptr<net::DeferredResponse>(std::move(outer));
}

HandlerResult Tokenize(const SimContext& ctx, const HttpRequest& request) {
  auto parsed = api::ParseTokenizeRequest(request.body);
  if (!parsed) return ErrorResponse(parsed.error());
  if (parsed->model && *parsed->model != ctx.served_model_name) {
    return ErrorResponse(api::ApiError::ModelNotFound(*parsed->model));
  }
  std::vector<TokenId> ids;
  if (auto* chat = std::get_if<tokenize::ChatRequest>(&parsed->input)) {
    auto encoded = ctx.tokenizer->EncodeChat(*chat);
    if (!encoded) return ErrorResponse(api::ApiError::InvalidRequest(encoded.error(), "messages"));
    ids = std::move(*encoded);
  } else {
    ids = ctx.tokenizer->Encode(std::get<std::string>(parsed->input), parsed->add_special_tokens);
  }
  std::optional<std::vector<std::string>> strs;
  if (parsed->return_token_strs) {
    strs.emplace();
    for (TokenId id : ids) strs->push_back(ctx.tokenizer->Decode({id}).value_or(""));
  }
  return net::JsonResponse(
      200, boost::json::serialize(api::TokenizeResponseJson(ids, ctx.max_model_len, strs)));
}

HandlerResult Detokenize(const SimContext& ctx, const HttpRequest& request) {
  auto parsed = api::ParseDetokenizeRequest(request.body);
  if (!parsed) return ErrorResponse(parsed.error());
  if (parsed->model && *parsed->model != ctx.served_model_name) {
    return ErrorResponse(api::ApiError::ModelNotFound(*parsed->model));
  }
  if (auto ok = CheckTokenIds(parsed->tokens, *ctx.tokenizer, "tokens"); !ok) {
    return ErrorResponse(ok.error());
  }
  auto text = ctx.tokenizer->Decode(parsed->tokens);
  if (!text) return ErrorResponse(api::ApiError::InvalidRequest(text.error(), "tokens"));
  return net::JsonResponse(200, boost::json::serialize(api::DetokenizeResponseJson(*text)));
}

}  // namespace

void RegisterSimHandlers(const SimContext& ctx, net::HttpServer& server) {
  // Handlers hold a copy of the context; its pointers are borrowed (see the header).
  server.Handle("POST", "/v1/completions", [ctx](const HttpRequest& r) {
    return Generate(ctx, api::Endpoint::kCompletions, r);
  });
  server.Handle("POST", "/v1/chat/completions", [ctx](const HttpRequest& r) {
    return Generate(ctx, api::Endpoint::kChatCompletions, r);
  });
  server.Handle("GET", "/v1/models", [ctx](const HttpRequest&) -> HandlerResult {
    std::vector<api::ModelCard> cards = {api::ModelCard{.id = ctx.served_model_name,
                                                        .created = ctx.created,
                                                        .owned_by = "vllm",
                                                        .root = ctx.model_root,
                                                        .parent = std::nullopt,
                                                        .max_model_len = ctx.max_model_len}};
    // vLLM lists each adapter with its path as root and the base model as parent.
    for (const auto& m : ctx.lora_modules) {
      cards.push_back(api::ModelCard{.id = std::string(AdapterName(m)),
                                     .created = ctx.created,
                                     .owned_by = "vllm",
                                     .root = std::string(AdapterPath(m)),
                                     .parent = ctx.served_model_name,
                                     .max_model_len = ctx.max_model_len});
    }
    return net::JsonResponse(200, boost::json::serialize(api::ModelsListJson(cards)));
  });
  server.Handle("GET", "/health",
                [](const HttpRequest&) -> HandlerResult { return net::TextResponse(200, ""); });
  server.Handle("GET", "/health/ready", [ctx](const HttpRequest&) -> HandlerResult {
    if (ctx.draining && ctx.draining->load()) return net::TextResponse(503, "");
    return net::TextResponse(200, "");
  });
  server.Handle("POST", "/tokenize", [ctx](const HttpRequest& r) { return Tokenize(ctx, r); });
  server.Handle("POST", "/detokenize", [ctx](const HttpRequest& r) { return Detokenize(ctx, r); });
  server.Handle("GET", "/metrics", [ctx](const HttpRequest&) -> HandlerResult {
    return net::TextResponse(200, telemetry::ExposeText(*ctx.registry),
                             telemetry::kPrometheusContentType);
  });
  server.Handle("POST", "/reset_prefix_cache", [ctx](const HttpRequest&) -> HandlerResult {
    auto slot = std::make_shared<net::DeferredSlot>();
    ctx.loop->ResetPrefixCache([slot](bool ok) {
      slot->Set(ok ? net::TextResponse(200, "")
                   : ErrorResponse(api::ApiError::Overloaded(
                         "the prefix cache cannot be reset while requests are running")));
    });
    return std::shared_ptr<net::DeferredResponse>(std::move(slot));
  });
  server.Handle("GET", "/debug/kv_cache", [ctx](const HttpRequest&) -> HandlerResult {
    auto slot = std::make_shared<net::DeferredSlot>();
    EngineLoop* loop = ctx.loop;
    const kv::ZmqEventPublisher* publisher = ctx.publisher;
    loop->InspectCache([slot, loop, publisher](CacheContents contents) {
      std::optional<kv::ZmqPublisherStats> stats;
      if (publisher != nullptr) stats = publisher->stats();
      slot->Set(net::JsonResponse(
          200, KvCacheDebugJson(contents, loop->engine_config(), stats ? &*stats : nullptr)));
    });
    return std::shared_ptr<net::DeferredResponse>(std::move(slot));
  });
}

}  // namespace kvroute::sim

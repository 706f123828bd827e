#include "gateway/request_pipeline.h"

#include "sched/tier_pricing.h"

#include <algorithm>
#include <boost/json.hpp>
#include <cstring>

#include "api/anthropic_messages.h"
#include "api/chat_request.h"
#include "api/completion_request.h"
#include "api/context_length.h"
#include "fleet/booking.h"
#include "fleet/router_state.h"
#include "gateway/pd_debug.h"
#include "kv/index/index_overlay.h"
#include "sched/latency_model.h"
#include "tokenize/simple_tokenizer.h"

namespace kvroute::gateway {
namespace {

// Approximate mode renders chat requests as ChatML: only prefix equality matters there, and
// the SimpleTokenizer's renderer needs no model files.
const tokenize::SimpleTokenizer& ChatMlRenderer() {
  static const tokenize::SimpleTokenizer renderer;
  return renderer;
}

std::string IdsAsBytes(const std::vector<TokenId>& ids) {
  std::string out(ids.size() * 4, '\0');
  for (std::size_t i = 0; i < ids.size(); ++i) {
    for (int b = 0; b < 4; ++b) out[i * 4 + b] = static_cast<char>((ids[i] >> (8 * b)) & 0xFF);
  }
  return out;
}

bool ServesModel(const fleet::RouterState& router_state, std::string_view model) {
  return router_state.AnySpec([model](const fleet::WorkerSpec& spec) {
    return std::find(spec.models.begin(), spec.models.end(), model) != spec.models.end();
  });
}

// The worker's base URL, read in place (no copy of its whole spec per request).
std::string BaseUrlOf(const fleet::RouterState& router_state, WorkerId worker) {
  std::string url;
  router_state.VisitSpec(worker, [&url](const fleet::WorkerSpec& spec) { url = spec.base_url; });
  return url;
}


}  // namespace

sched::RequestProfile ProfileOf(const PreparedRequest& request) {
  sched::RequestProfile profile;
  profile.model = request.model;
  profile.prompt_tokens =
      static_cast<std::uint64_t>(std::max<std::int64_t>(request.prompt_tokens, 0));
  profile.block_size = request.block_size;
  profile.num_full_blocks = static_cast<std::uint32_t>(request.keys.size());
  profile.predicted_output_tokens =
      static_cast<std::uint64_t>(std::max<std::int64_t>(request.output_tokens, 0));
  return profile;
}

RequestPipeline::RequestPipeline(PipelineDeps deps, PipelineOptions options)
    : deps_(std::move(deps)),
      options_(options),
      approx_keyer_(options.block_size),
      tenants_(options_.tenancy) {}

std::uint32_t RequestPipeline::block_size() const {
  if (options_.mode == RoutingMode::kPrecise && deps_.index != nullptr) {
    return deps_.index->keyer().block_size();
  }
  return approx_keyer_.block_size();
}

std::vector<kv::BlockKey> RequestPipeline::KeysOfText(std::string_view text) const {
  const std::size_t bs = approx_keyer_.block_size();
  const std::size_t bytes_per_block = bs * 4;
  std::vector<kv::BlockKey> keys;
  keys.reserve(text.size() / bytes_per_block);
  std::vector<TokenId> words(bs);
  kv::BlockKey parent = approx_keyer_.Root();
  for (std::size_t off = 0; off + bytes_per_block <= text.size(); off += bytes_per_block) {
    for (std::size_t w = 0; w < bs; ++w) {
      const auto* p = reinterpret_cast<const unsigned char*>(text.data() + off + w * 4);
      words[w] = static_cast<TokenId>(p[0]) | static_cast<TokenId>(p[1]) << 8 |
                 static_cast<TokenId>(p[2]) << 16 | static_cast<TokenId>(p[3]) << 24;
    }
    parent = approx_keyer_.Next(parent, words);
    keys.push_back(parent);
  }
  return keys;
}

std::expected<PreparedRequest, api::ApiError> RequestPipeline::Prepare(
    api::Endpoint endpoint, std::string_view body, Nanos now, const RequestContext& context) const {
  return PrepareOwned(endpoint, std::string(body), now, context);
}

std::expected<PreparedRequest, api::ApiError> RequestPipeline::PrepareOwned(
    api::Endpoint endpoint, std::string&& body_bytes, Nanos now,
    const RequestContext& context) const {
  (void)now;
  PreparedRequest out;
  out.endpoint = endpoint;
  out.body = std::make_shared<const std::string>(std::move(body_bytes));
  const std::string_view body = *out.body;
  out.block_size = block_size();
  api::GenerationParams params;
  std::optional<api::Prompt> prompt;
  std::optional<tokenize::ChatRequest> chat;
  boost::json::object parsed_body;
  std::vector<api::ImagePart> images;
  if (endpoint == api::Endpoint::kCompletions) {
    auto parsed = api::ParseCompletionRequest(body);
    if (!parsed) return std::unexpected(parsed.error());
    params = std::move(parsed->params);
    prompt = std::move(parsed->prompt);
    parsed_body = std::move(parsed->body);
  } else {
    auto parsed = api::ParseChatCompletionRequest(
        body, api::ImageOptions{.accept = options_.accept_images,
                                .placeholder = options_.image_tokens.placeholder});
    if (!parsed) return std::unexpected(parsed.error());
    params = std::move(parsed->params);
    chat = std::move(parsed->chat);
    parsed_body = std::move(parsed->body);
    images = std::move(parsed->images);
  }
  bool rewrite = false;
  if (context.rewrite_model) {
    if (std::string to = context.rewrite_model(params.model); !to.empty() && to != params.model) {
      out.requested_model = params.model;
      params.model = to;
      parsed_body["model"] = std::move(to);
      rewrite = true;
    }
  }
  out.model = params.model;
  out.stream = params.stream;
  out.output_tokens = params.max_tokens.value_or(kAssumedOutputTokens);
  if (!ServesModel(*deps_.router_state, out.model)) {
    return std::unexpected(api::ApiError::ModelNotFound(out.model));
  }
  // Extra keys (kv/keys/extra_keys.h): the adapter, and the salt the engine will get — the
  // tenant's combined with the client's, written into the forwarded body.
  if (deps_.is_lora_adapter && deps_.is_lora_adapter(out.model)) out.lora_name = out.model;
  const std::string client_salt = params.cache_salt.value_or("");
  out.cache_salt =
      tenants_.enabled() ? CombineSalts(context.tenant_salt, client_salt) : client_salt;
  if (out.cache_salt != client_salt) {
    parsed_body["cache_salt"] = out.cache_salt;
    rewrite = true;
  }
  if (options_.set_image_uuid &&
      std::any_of(images.begin(), images.end(), [](const auto& i) { return !i.has_uuid; })) {
    api::SetImageUuids(&parsed_body, images);
    rewrite = true;
  }
  if (rewrite) {
    out.body = std::make_shared<const std::string>(boost::json::serialize(parsed_body));
  }
  const std::string& salt = out.cache_salt;

  if (options_.mode == RoutingMode::kPrecise) {
    std::vector<TokenId> tokens;
    if (prompt) {
      if (const auto* text = std::get_if<std::string>(&*prompt)) {
        tokens = deps_.tokenizer->Encode(*text, /*add_special_tokens=*/true);
      } else {
        tokens = std::get<std::vector<TokenId>>(*prompt);
      }
    } else {
      auto ids = deps_.tokenizer->EncodeChat(*chat);
      if (!ids) {
        out.schedule_error = "tokenizer: " + ids.error();
        out.prompt_tokens = 0;
        return out;
      }
      tokens = std::move(*ids);
      // Each image's placeholder becomes its tokens, and its span names it in the keys.
      auto spans = tokenize::ExpandImagePlaceholders(*deps_.tokenizer, options_.image_tokens,
                                                     images.size(), &tokens);
      if (!spans) {
        out.schedule_error = "images: " + spans.error();
        return out;
      }
      for (std::size_t i = 0; i < images.size(); ++i) {
        out.images.push_back(kv::MmItem{.identifier = images[i].identifier,
                                        .offset = (*spans)[i].offset,
                                        .length = (*spans)[i].length});
      }
    }
    out.prompt_tokens = static_cast<std::int64_t>(tokens.size());
    if (deps_.max_model_len) {
      if (auto max_len = deps_.max_model_len(out.model); max_len && *max_len > 0) {
        auto allowed = api::CheckContextLength(out.prompt_tokens, params.max_tokens, *max_len);
        if (!allowed) return std::unexpected(allowed.error());
      }
    }
    out.keys = deps_.index->keyer().Keys(
        tokens,
        kv::ExtraKeyInputs{.lora_name = out.lora_name, .cache_salt = salt, .mm_items = out.images});
    return out;
  }

  // Approximate: bytes of the rendered prompt.
  std::string text;
  if (prompt) {
    if (const auto* t = std::get_if<std::string>(&*prompt)) {
      text = *t;
    } else {
      text = IdsAsBytes(std::get<std::vector<TokenId>>(*prompt));
    }
  } else {
    auto rendered = ChatMlRenderer().RenderChat(*chat);
    if (!rendered) {
      out.schedule_error = "render: " + rendered.error();
      return out;
    }
    text = std::move(*rendered);
    // Each image's identifier right after its placeholder: other images, other keys.
    std::size_t at = 0;
    for (const auto& image : images) {
      at = text.find(options_.image_tokens.placeholder, at);
      if (at == std::string::npos) break;
      at += options_.image_tokens.placeholder.size();
      text.insert(at, "[" + image.identifier + "]");
    }
  }
  // The adapter and the salt separate caches: fold them into block 0 by prefixing the text
  // (approximate keys only need to agree with the router's own history).
  if (!salt.empty() || !out.lora_name.empty()) {
    text = "lora:" + out.lora_name + '\0' + "salt:" + salt + '\0' + text;
  }
  out.prompt_tokens = static_cast<std::int64_t>(text.size() / 4);
  out.keys = KeysOfText(text);
  return out;
}

std::expected<PreparedRequest, api::ApiError> RequestPipeline::PrepareMessages(
    std::string_view body, Nanos now, const RequestContext& context) const {
  auto parsed = api::ParseAnthropicRequest(body);
  if (!parsed) return std::unexpected(std::move(parsed.error()));
  auto prepared =
      PrepareOwned(api::Endpoint::kChatCompletions, api::OpenAiChatBody(*parsed), now, context);
  if (prepared) prepared->surface = ApiSurface::kAnthropic;
  return prepared;
}

std::vector<sched::CacheView> RequestPipeline::CacheViews(std::span<const kv::BlockKey> keys,
                                                          Nanos now) const {
  std::vector<sched::CacheView> views;
  if (keys.empty()) return views;
  if (options_.mode == RoutingMode::kPrecise && deps_.index != nullptr) {
    for (const auto& m : kv::LookupWithPredictions(*deps_.index, *deps_.predicted, keys, now)) {
      sched::CacheView v;
      v.worker = m.worker;
      v.depth_blocks = m.depth;
      v.any_depth_blocks = m.any_depth;
      v.stale = m.stale;
      views.push_back(v);
    }
    return views;
  }
  for (const auto& m : deps_.predicted->Lookup(keys, now)) {
    sched::CacheView v;
    v.worker = m.worker;
    v.depth_blocks[static_cast<int>(kv::Tier::kGpu)] = m.depth;
    v.any_depth_blocks = m.depth;
    views.push_back(v);
  }
  return views;
}

std::expected<RouteOutcome, api::ApiError> RequestPipeline::Fallback(
    const PreparedRequest& request, std::vector<sched::WorkerSnapshot> workers,
    std::string reason) const {
  if (options_.failure_mode == FailureMode::kFailClose) {
    return std::unexpected(
        api::ApiError::Overloaded("the router could not schedule this request; try again"));
  }
  const sched::WorkerSnapshot* best = nullptr;
  for (const auto& w : workers) {
    if (!w.healthy || w.draining) continue;
    if (best == nullptr || w.inflight_requests < best->inflight_requests ||
        (w.inflight_requests == best->inflight_requests &&
         w.pending_prefill_tokens < best->pending_prefill_tokens)) {
      best = &w;
    }
  }
  if (best == nullptr) {
    return std::unexpected(api::ApiError::Overloaded("no worker is available for this model"));
  }
  RouteOutcome out;
  out.worker = best->id;
  out.worker_name = best->name;
  out.base_url = BaseUrlOf(*deps_.router_state, best->id);
  out.fell_back = true;
  out.fallback_reason = std::move(reason);
  out.decision.policy = "fail_open";
  out.decision.chosen = best->id;
  // Nothing was looked up: the whole prompt is booked as uncached.
  out.booking = fleet::BookingFor(ProfileOf(request), {}, best->id, nullptr, 1);
  return out;
}

std::expected<RouteOutcome, api::ApiError> RequestPipeline::Route(const PreparedRequest& request,
                                                                  std::span<const WorkerId> exclude,
                                                                  Nanos now,
                                                                  sched::PolicyState& state) const {
  std::vector<sched::WorkerSnapshot> workers = deps_.router_state->Snapshot(now, request.model);
  std::erase_if(workers, [&](const sched::WorkerSnapshot& w) {
    return std::find(exclude.begin(), exclude.end(), w.id) != exclude.end();
  });
  if (workers.empty()) {
    return std::unexpected(api::ApiError::Overloaded("no worker is available for this model"));
  }
  if (request.schedule_error) return Fallback(request, std::move(workers), *request.schedule_error);
  if (options_.inject_schedule_error) {
    return Fallback(request, std::move(workers), "injected fault (debug.fault: schedule_error)");
  }

  sched::RequestProfile profile = ProfileOf(request);
  if (options_.itl_slo_s > 0) profile.itl_slo_s = options_.itl_slo_s;
  if (deps_.policy->RequiredInputs() & sched::kCacheView) {
    profile.cache_views = CacheViews(request.keys, now);
    // The shared store's blocks (indexed once, under its own id) count for every worker.
    sched::MergeSharedTier(workers, &profile.cache_views);
  }
  auto decision = deps_.policy->Decide(profile, workers, state);
  if (!decision)
    return Fallback(request, std::move(workers), "policy: " + decision.error().message);
  if (!decision->chosen) {
    return std::unexpected(
        api::ApiError::Overloaded("no worker can take this request now: " + decision->why_none));
  }
  RouteOutcome out;
  out.worker = *decision->chosen;
  double wait_correction = 1;
  for (const auto& w : workers) {
    if (w.id != out.worker) continue;
    out.worker_name = w.name;
    wait_correction = w.wait_correction;
  }
  out.base_url = BaseUrlOf(*deps_.router_state, out.worker);
  const fleet::CachedPrefix cached = fleet::CachedPrefixOn(profile, out.worker);
  out.cached_blocks = cached.blocks;
  out.cached_any_blocks = cached.any_blocks;
  out.booking = fleet::BookingFor(profile, cached, out.worker, &*decision, wait_correction);
  out.decision = std::move(*decision);
  return out;
}

void RequestPipeline::OnRoutedTo(const PreparedRequest& request, WorkerId worker,
                                 Nanos now) const {
  if (!request.cache_salt.empty() && deps_.on_salted_route) deps_.on_salted_route(worker);
  if (request.keys.empty()) return;
  deps_.predicted->Record(worker, request.keys, now);
  if (deps_.on_predicted) deps_.on_predicted(worker, request.keys);
}

std::string DecisionJson(const PreparedRequest& request, const RouteOutcome* outcome,
                         const sched::Decision& decision, std::string_view error,
                         std::span<const sched::CacheView> views,
                         const std::function<std::string(WorkerId)>& name_of) {
  boost::json::object o;
  boost::json::object req;
  req["model"] = request.model;
  req["stream"] = request.stream;
  req["prompt_tokens"] = request.prompt_tokens;
  req["block_size"] = request.block_size;
  req["full_blocks"] = request.keys.size();
  if (!request.lora_name.empty()) req["lora_name"] = request.lora_name;
  req["salted"] = !request.cache_salt.empty();  // the salt itself is never shown
  if (!request.images.empty()) {
    boost::json::array images;
    for (const auto& i : request.images) {
      images.push_back(boost::json::object{
          {"identifier", i.identifier}, {"offset", i.offset}, {"tokens", i.length}});
    }
    req["images"] = std::move(images);
  }
  if (request.schedule_error) req["schedule_error"] = *request.schedule_error;
  o["request"] = std::move(req);
  o["policy"] = decision.policy;
  o["picker"] = decision.picker;
  if (!error.empty()) o["error"] = std::string(error);
  if (outcome != nullptr) {
    o["chosen"] = outcome->worker_name;
    o["fell_back"] = outcome->fell_back;
    if (outcome->fell_back) o["fallback_reason"] = outcome->fallback_reason;
    // Depths per tier (each counts blocks in that tier or a faster one), then the blocks each
    // tier is credited with: read from the fastest tier holding them (sched::LayerHits).
    boost::json::array tiers;
    for (auto d : outcome->cached_blocks) tiers.push_back(d);
    o["cached_blocks_by_tier"] = std::move(tiers);
    o["cached_any_blocks"] = outcome->cached_any_blocks;
    sched::CacheView chosen;
    chosen.depth_blocks = outcome->cached_blocks;
    chosen.any_depth_blocks = outcome->cached_any_blocks;
    const sched::LayeredHits hits =
        sched::LayerHits(chosen, static_cast<std::uint32_t>(request.keys.size()));
    boost::json::array credited;
    for (auto b : hits.blocks) credited.push_back(b);
    o["credited_blocks_by_tier"] = std::move(credited);
    o["credited_mixed_blocks"] = hits.mixed_blocks;
    o["uncached_tokens"] = outcome->booking.uncached_tokens;
  } else {
    o["chosen"] = nullptr;
  }
  if (!decision.why_none.empty()) o["why_none"] = decision.why_none;
  boost::json::array notes;
  for (const auto& n : decision.notes) notes.push_back(boost::json::string(n));
  o["notes"] = std::move(notes);
  boost::json::array scorers;
  for (const auto& s : decision.scorers) {
    scorers.push_back(boost::json::object{{"name", s.name}, {"weight", s.weight}});
  }
  o["scorers"] = std::move(scorers);
  boost::json::array cands;
  for (const auto& c : decision.candidates) {
    boost::json::object j;
    j["worker"] = c.name;
    j["cache_stale"] = c.cache_stale;
    if (!views.empty()) {
      std::uint32_t any = 0;
      for (const auto& v : views) {
        if (v.worker == c.worker) any = v.any_depth_blocks;
      }
      j["cached_any_blocks"] = any;
    }
    if (c.dropped_by) {
      j["dropped_by"] = *c.dropped_by;
      j["drop_reason"] = c.drop_reason;
    }
    boost::json::array costs;
    for (double v : c.costs) costs.push_back(v);
    j["costs"] = std::move(costs);
    if (c.total_cost) j["total_cost"] = *c.total_cost;
    if (c.probability) j["probability"] = *c.probability;
    if (c.predicted_ttft_s) j["predicted_ttft_s"] = *c.predicted_ttft_s;
    if (c.predicted_itl_s) j["predicted_itl_s"] = *c.predicted_itl_s;
    cands.push_back(std::move(j));
  }
  o["candidates"] = std::move(cands);
  if (outcome != nullptr && outcome->pd) o["pd"] = PdDecisionJson(*outcome->pd, name_of);
  o["trace"] = sched::RenderDecision(decision);
  return boost::json::serialize(o);
}

}  // namespace kvroute::gateway

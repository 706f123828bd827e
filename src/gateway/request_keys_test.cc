// The request path's keys against the index's event path, for the requests whose keys carry
// extra keys (kv/keys/extra_keys.h): a tenant's salted request, a LoRA adapter's request, a
// client's own salt. The engine model (what `kvroute sim` runs) executes the request with
// vLLM's hashing and emits vLLM's events, which go through the wire codec into the index;
// the pipeline prepares the same body. Equal keys mean the engine's blocks are found at full
// depth for the same request, and never for another tenant's or another adapter's.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "api/chat_request.h"
#include "engine/engine.h"
#include "engine/profile.h"
#include "gateway/request_pipeline.h"
#include "fleet/router_state.h"
#include "kv/wire/event_decode.h"
#include "kv/wire/event_encode.h"
#include "sched/registry.h"
#include "tokenize/simple_tokenizer.h"

namespace kvroute::gateway {
namespace {

using std::chrono::seconds;

constexpr std::uint32_t kBlock = 16;

class RequestKeysTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fleet::WorkerSpec spec;
    spec.name = "w0";
    spec.base_url = "http://127.0.0.1:1";
    spec.models = {"m", "sql-lora"};
    spec.block_size = kBlock;
    auto id = router_state_.Add(spec, now_);
    ASSERT_TRUE(id.has_value()) << id.error();
    worker_ = *id;
    auto policy = sched::BuiltinPolicy("predicted_latency");
    ASSERT_TRUE(policy.has_value());
    PipelineDeps deps;
    deps.router_state = &router_state_;
    deps.index = &index_;
    deps.predicted = &predicted_;
    deps.tokenizer = tokenizer_;
    deps.policy = *policy;
    deps.is_lora_adapter = [](std::string_view m) { return m == "sql-lora"; };
    deps.on_salted_route = [this](WorkerId w) { index_.MarkSaltedTraffic(w); };
    PipelineOptions opts;
    opts.block_size = kBlock;
    opts.tenancy.from = "header";
    opts.tenancy.header = "X-Tenant";
    opts.tenancy.salts = {{"acme", "salt-acme"}};
    pipeline_ = std::make_unique<RequestPipeline>(std::move(deps), opts);
    auto profile = engine::LoadProfile(engine::kDefaultProfileName);
    ASSERT_TRUE(profile.has_value());
    engine::EngineConfig config;
    config.block_size = kBlock;
    config.num_gpu_blocks_override = 256;
    engine_ = engine::NewEngine(*profile, config);
  }

  static std::string Body(std::string_view model, std::optional<std::string> salt = {}) {
    std::string prompt;
    for (int i = 0; i < 40; ++i)
      prompt += "shared words of a long system prompt " + std::to_string(i);
    boost::json::object o{{"model", model}, {"prompt", prompt}, {"max_tokens", 2}};
    if (salt) o["cache_salt"] = *salt;
    return boost::json::serialize(o);
  }

  PreparedRequest Prepare(const std::string& body, std::string_view tenant = {}) {
    net::HttpRequest http;
    if (!tenant.empty()) http.headers.emplace_back("x-tenant", std::string(tenant));
    auto p = pipeline_->Prepare(api::Endpoint::kCompletions, body, now_,
                                RequestContext{.tenant_salt = pipeline_->TenantSalt(http)});
    EXPECT_TRUE(p.has_value()) << p.error().message;
    return p.value_or(PreparedRequest{});
  }

  // Runs the prepared request on the engine as the worker would (model, adapter and the
  // forwarded body's cache_salt), and applies its events to the index through the wire.
  void RunOnEngine(const PreparedRequest& r) {
    auto body = boost::json::parse(*r.body).as_object();
    engine::RequestSpec spec;
    spec.id = "r" + std::to_string(++serial_);
    spec.prompt = tokenizer_->Encode(std::string(body.at("prompt").as_string()), true);
    spec.max_tokens = 2;
    spec.ignore_eos = true;
    spec.lora_name = r.lora_name;  // the sim names the adapter from the model (sim_handlers)
    if (auto* salt = body.if_contains("cache_salt"))
      spec.cache_salt = std::string(salt->as_string());
    Execute(std::move(spec));
  }

  void Execute(engine::RequestSpec spec) {
    ASSERT_FALSE(engine_->Add(std::move(spec)));
    Nanos t{0};
    for (int i = 0; i < 100 && engine_->HasWork(); ++i) {
      engine::StepResult step = engine_->Step(t);
      t += step.duration;
      if (step.kv_events.empty()) continue;
      kv::KvEventBatch batch{.ts = 1, .events = step.kv_events};
      auto bytes = kv::EncodeEventBatch(batch);
      kv::KvEventBatch decoded;
      ASSERT_TRUE(kv::DecodeEventBatch(bytes.data(), bytes.size(), &decoded).ok());
      index_.ApplyBatch(worker_, decoded);
    }
  }

  // A chat with one image, prepared as the proxy prepares it.
  PreparedRequest PrepareChat(std::string_view image_payload) {
    boost::json::object image{{"url", "data:image/png;base64," + std::string(image_payload)}};
    boost::json::array content{
        boost::json::object{{"type", "image_url"}, {"image_url", std::move(image)}},
        boost::json::object{{"type", "text"}, {"text", "Describe the photo in one line."}}};
    std::string system;
    for (int i = 0; i < 12; ++i) system += "You describe catalogue photos, plainly. ";
    boost::json::object o{
        {"model", "m"},
        {"max_tokens", 2},
        {"messages",
         boost::json::array{boost::json::object{{"role", "system"}, {"content", system}},
                            boost::json::object{{"role", "user"}, {"content", content}}}}};
    auto p = pipeline_->Prepare(api::Endpoint::kChatCompletions, boost::json::serialize(o), now_);
    EXPECT_TRUE(p.has_value()) << p.error().message;
    return p.value_or(PreparedRequest{});
  }

  // Runs a prepared chat as the sim does (sim_handlers.cc): the forwarded body parsed with
  // images, rendered, its images expanded and named by the uuid kvroute forwarded.
  void RunChatOnEngine(const PreparedRequest& r) {
    const tokenize::ImageTokenOptions images;  // the sim's defaults, as the pipeline's
    auto parsed = api::ParseChatCompletionRequest(
        *r.body, api::ImageOptions{.accept = true, .placeholder = images.placeholder});
    ASSERT_TRUE(parsed.has_value());
    auto tokens = tokenizer_->EncodeChat(parsed->chat);
    ASSERT_TRUE(tokens.has_value());
    auto spans =
        tokenize::ExpandImagePlaceholders(*tokenizer_, images, parsed->images.size(), &*tokens);
    ASSERT_TRUE(spans.has_value());
    engine::RequestSpec spec;
    spec.id = "r" + std::to_string(++serial_);
    spec.prompt = std::move(*tokens);
    spec.max_tokens = 2;
    spec.ignore_eos = true;
    for (std::size_t i = 0; i < spans->size(); ++i) {
      ASSERT_TRUE(parsed->images[i].has_uuid);  // kvroute named it in the forwarded body
      spec.mm_items.push_back({.identifier = parsed->images[i].identifier,
                               .offset = (*spans)[i].offset,
                               .length = (*spans)[i].length});
    }
    Execute(std::move(spec));
  }

  std::uint32_t Depth(const PreparedRequest& r) const {
    for (const auto& m : index_.Lookup(r.keys)) {
      if (m.worker == worker_) return m.any_depth;
    }
    return 0;
  }

  Nanos now_ = seconds(100);
  fleet::RouterState router_state_;
  kv::KvIndex index_{kv::BlockKeyer(kBlock)};
  kv::PredictedBlocks predicted_{kv::PredictedOptions{.ttl = seconds(5)}};
  tokenize::TokenizerPtr tokenizer_ = std::make_shared<tokenize::SimpleTokenizer>();
  std::unique_ptr<RequestPipeline> pipeline_;
  std::unique_ptr<engine::Engine> engine_;
  WorkerId worker_ = 0;
  int serial_ = 0;
};

TEST_F(RequestKeysTest, ATenantsRequestMatchesItsOwnBlocksAtFullDepth) {
  PreparedRequest r = Prepare(Body("m"), "acme");
  ASSERT_GT(r.keys.size(), 4u);
  EXPECT_EQ(r.cache_salt, CombineSalts("salt-acme", ""));
  EXPECT_NE(r.body->find("\"cache_salt\""), std::string::npos);  // forwarded to the engine
  RunOnEngine(r);
  EXPECT_EQ(Depth(r), r.keys.size());
}

TEST_F(RequestKeysTest, NoOtherTenantNorAnUnsaltedRequestIsCreditedWithATenantsBlocks) {
  PreparedRequest acme = Prepare(Body("m"), "acme");
  RunOnEngine(acme);
  EXPECT_EQ(Depth(Prepare(Body("m"), "globex")), 0u);  // derived salt of an unlisted tenant
  EXPECT_EQ(Depth(Prepare(Body("m"))), 0u);            // no tenant: no salt
  // A client cannot reach a tenant's cache by sending that tenant's salt itself.
  EXPECT_EQ(Depth(Prepare(Body("m", "salt-acme"))), 0u);
  EXPECT_EQ(Depth(Prepare(Body("m", "salt-acme"), "globex")), 0u);
  EXPECT_EQ(Depth(Prepare(Body("m", CombineSalts("salt-acme", "")))), 0u);  // the combined form
}

TEST_F(RequestKeysTest, AClientsOwnSaltStaysInsideItsTenant) {
  PreparedRequest own = Prepare(Body("m", "mine"), "acme");
  RunOnEngine(own);
  EXPECT_EQ(Depth(own), own.keys.size());
  EXPECT_EQ(Depth(Prepare(Body("m"), "acme")), 0u);
  EXPECT_EQ(Depth(Prepare(Body("m", "mine"), "globex")), 0u);
}

TEST_F(RequestKeysTest, AnAdapterRequestMatchesItsAdapterBlocksAndNotTheBaseModels) {
  PreparedRequest lora = Prepare(Body("sql-lora"));
  EXPECT_EQ(lora.lora_name, "sql-lora");
  RunOnEngine(lora);
  EXPECT_EQ(Depth(lora), lora.keys.size());
  EXPECT_EQ(Depth(Prepare(Body("m"))), 0u);
  PreparedRequest base = Prepare(Body("m"));
  RunOnEngine(base);
  EXPECT_EQ(Depth(base), base.keys.size());
}

TEST_F(RequestKeysTest, AnImageChatMatchesItsImagesBlocksAndAnotherImageOnlyBeforeIt) {
  PreparedRequest a = PrepareChat("AAAA");
  ASSERT_EQ(a.images.size(), 1u);
  EXPECT_EQ(a.images[0].length, tokenize::kDefaultTokensPerImage);
  EXPECT_NE(a.body->find("\"uuid\""), std::string::npos);
  RunChatOnEngine(a);
  EXPECT_EQ(Depth(a), a.keys.size());
  PreparedRequest b = PrepareChat("BBBB");
  ASSERT_EQ(b.keys.size(), a.keys.size());
  EXPECT_EQ(Depth(b), a.images[0].offset / kBlock);  // the blocks wholly before the image
}

TEST_F(RequestKeysTest, ASaltedRouteMarksTheWorkerForEventsWithoutExtraKeys) {
  PreparedRequest r = Prepare(Body("m"), "acme");
  sched::PolicyState state(1);
  auto route = pipeline_->Route(r, {}, now_, state);
  ASSERT_TRUE(route.has_value());
  pipeline_->OnRouted(r, *route, now_);
  // An engine that sends no extra_keys: its block 0 might be anyone's now.
  kv::BlockStored e;
  e.block_size = kBlock;
  e.token_ids.assign(kBlock, 7);
  e.block_hashes = {42};
  index_.ApplyEvent(worker_, kv::KvEvent{e});
  EXPECT_EQ(index_.counters().unattributed_runs, 1u);
}

}  // namespace
}  // namespace kvroute::gateway

// RequestPipeline::RouteTwoLegs (gateway/pd_route.cc): the leg planning of a P/D placement
// with real, in-memory collaborators (router state, index, predictions) and injected time.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "fleet/router_state.h"
#include "gateway/request_pipeline.h"
#include "sched/registry.h"
#include "tokenize/simple_tokenizer.h"

namespace kvroute::gateway {
namespace {

using std::chrono::seconds;

constexpr std::uint32_t kBlock = 16;

class PdRouteTest : public ::testing::Test {
 protected:
  // Workers "p" (prefill), "d1", "d2" (decode), or three mixed ones.
  void SetUp(bool with_roles, PipelineOptions::PdMode mode = PipelineOptions::PdMode::kAuto,
             bool inject = false) {
    const std::vector<std::pair<std::string, sched::Role>> fleet =
        with_roles ? std::vector<std::pair<std::string, sched::Role>>{{"p", sched::Role::kPrefill},
                                                                      {"d1", sched::Role::kDecode},
                                                                      {"d2", sched::Role::kDecode}}
                   : std::vector<std::pair<std::string, sched::Role>>{{"m0", sched::Role::kMixed},
                                                                      {"m1", sched::Role::kMixed},
                                                                      {"m2", sched::Role::kMixed}};
    for (const auto& [name, role] : fleet) {
      fleet::WorkerSpec spec;
      spec.name = name;
      spec.base_url = "http://127.0.0.1:1";
      spec.models = {"m"};
      spec.block_size = kBlock;
      spec.role = role;
      auto id = router_state_.Add(spec, now_);
      ASSERT_TRUE(id.has_value()) << id.error();
      ids_[name] = *id;
    }
    auto policy = sched::BuiltinPolicy("predicted_latency");
    ASSERT_TRUE(policy.has_value()) << policy.error().message;
    PipelineDeps deps;
    deps.router_state = &router_state_;
    deps.index = &index_;
    deps.predicted = &predicted_;
    deps.tokenizer = tokenizer_;
    deps.policy = *policy;
    PipelineOptions opts;
    opts.block_size = kBlock;
    opts.inject_schedule_error = inject;
    opts.pd_mode = mode;
    // Split whenever the decode worker would prefill anything itself (Dynamo's rule, cap 0):
    // the cost rule's choice depends on the profile's rates, this one on the request only.
    opts.pd.rule = sched::PdRule::kTokenCap;
    opts.pd.token_cap = 0;
    pipeline_ = std::make_unique<RequestPipeline>(std::move(deps), opts);
  }

  PreparedRequest Prepared(bool stream = true) {
    std::string prompt;
    for (int i = 0; i < 40; ++i) prompt += "word" + std::to_string(i) + " ";
    boost::json::object o{{"model", "m"},      {"prompt", prompt},
                          {"max_tokens", 20},  {"stream", stream},
                          {"min_tokens", 5},   {"stream_options", {{"include_usage", true}}}};
    auto r = pipeline_->Prepare(api::Endpoint::kCompletions, boost::json::serialize(o), now_);
    EXPECT_TRUE(r.has_value());
    return *r;
  }

  Nanos now_ = seconds(100);
  fleet::RouterState router_state_;
  kv::KvIndex index_{kv::BlockKeyer(kBlock)};
  kv::PredictedBlocks predicted_{kv::PredictedOptions{.ttl = seconds(5)}};
  tokenize::TokenizerPtr tokenizer_ = std::make_shared<tokenize::SimpleTokenizer>();
  std::unique_ptr<RequestPipeline> pipeline_;
  std::map<std::string, WorkerId> ids_;
  sched::PolicyState state_{1};
};

TEST_F(PdRouteTest, SplitPlansAPrefillLegOnPAndADecodeLegWithNothingToPrefill) {
  SetUp(/*with_roles=*/true);
  PreparedRequest req = Prepared();
  auto out = pipeline_->RouteTwoLegs(req, {}, now_, state_);
  ASSERT_TRUE(out.has_value()) << out.error().message;
  EXPECT_TRUE(out->pd_placed);
  ASSERT_TRUE(out->prefill.has_value());
  EXPECT_EQ(out->prefill->worker, ids_["p"]);
  EXPECT_NE(out->worker, ids_["p"]);
  const auto prompt = static_cast<std::uint64_t>(req.prompt_tokens);
  // Prefill leg: P computes the whole (uncached) prompt and holds its blocks.
  EXPECT_EQ(out->prefill->booking.worker, ids_["p"]);
  EXPECT_EQ(out->prefill->booking.uncached_tokens, prompt);
  EXPECT_EQ(out->prefill->booking.kv_blocks, (prompt + kBlock - 1) / kBlock);
  EXPECT_TRUE(out->prefill->booking.predicted_ttft_s.has_value());
  // Decode leg: nothing to prefill, and its first token is no prefill sample.
  EXPECT_EQ(out->booking.worker, out->worker);
  EXPECT_EQ(out->booking.uncached_tokens, 0u);
  EXPECT_FALSE(out->booking.observe_prefill);
  EXPECT_EQ(out->booking.kv_blocks, (prompt + 20 + kBlock - 1) / kBlock);
  // The fallback booking: D prefills all of it itself.
  EXPECT_EQ(out->prefill->local_booking.worker, out->worker);
  EXPECT_EQ(out->prefill->local_booking.uncached_tokens, prompt);
  EXPECT_TRUE(out->prefill->local_booking.observe_prefill);
}

// What /debug/route shows of a P/D placement (DecisionJson's "pd"): the split, the rule's
// numbers, both workers by name and every option priced.
TEST_F(PdRouteTest, DecisionJsonShowsTheSplitItsWorkersAndTheAlternatives) {
  SetUp(/*with_roles=*/true);
  PreparedRequest req = Prepared();
  auto out = pipeline_->RouteTwoLegs(req, {}, now_, state_);
  ASSERT_TRUE(out.has_value() && out->prefill.has_value());
  ASSERT_NE(out->pd, nullptr);
  std::map<WorkerId, std::string> names;
  for (const auto& [name, id] : ids_) names[id] = name;
  auto name_of = [&names](WorkerId id) { return names[id]; };
  auto j = boost::json::parse(DecisionJson(req, &*out, out->decision, {}, {}, name_of))
               .as_object();
  EXPECT_EQ(j.at("policy").as_string(), "pd:dynamo_token_cap");
  EXPECT_EQ(j.at("chosen").as_string(), out->worker_name);
  const auto& pd = j.at("pd").as_object();
  EXPECT_TRUE(pd.at("split").as_bool());
  EXPECT_EQ(pd.at("prefill_worker").as_string(), "p");
  EXPECT_EQ(pd.at("decode_worker").as_string(), out->worker_name);
  // Dynamo's rule: the uncached tokens on D against the cap (0 here).
  EXPECT_EQ(pd.at("threshold_tokens").to_number<std::uint64_t>(), 0u);
  EXPECT_EQ(pd.at("uncached_tokens").to_number<std::uint64_t>(), static_cast<std::uint64_t>(req.prompt_tokens));
  EXPECT_GT(pd.at("transfer_s").as_double(), 0);
  EXPECT_GT(pd.at("aggregated_cost_s").as_double(), 0);
  EXPECT_DOUBLE_EQ(pd.at("split_cost_s").as_double(), pd.at("cost_s").as_double());
  const auto& chosen = pd.at("chosen").as_object();
  EXPECT_EQ(chosen.at("placement").as_string(), "split");
  EXPECT_EQ(chosen.at("transfer_blocks").to_number<std::uint64_t>(), out->prefill->transfer_blocks);
  // The alternatives: aggregated on d1 and on d2, and the chosen decode worker's split.
  const auto& options = pd.at("options").as_array();
  ASSERT_EQ(options.size(), 3u);
  int aggregated = 0;
  for (const auto& o : options) {
    if (o.at("placement").as_string() == "aggregated") {
      ++aggregated;
      EXPECT_EQ(o.at("prefill_worker"), o.at("decode_worker"));
      EXPECT_FALSE(o.as_object().contains("transfer_s"));
    }
  }
  EXPECT_EQ(aggregated, 2);
  EXPECT_NE(pd.at("reason").as_string().find("dynamo_token_cap"), std::string::npos);
}

TEST_F(PdRouteTest, DecisionJsonOfAnAggregatedPlacementSaysWhyNotSplit) {
  SetUp(/*with_roles=*/true);
  PreparedRequest req = Prepared();
  // A cap above the prompt: D prefills it itself.
  PipelineOptions opts = pipeline_->options();
  opts.pd.token_cap = 1u << 20;
  PipelineDeps deps;
  deps.router_state = &router_state_;
  deps.index = &index_;
  deps.predicted = &predicted_;
  deps.tokenizer = tokenizer_;
  deps.policy = *sched::BuiltinPolicy("predicted_latency");
  RequestPipeline local(std::move(deps), opts);
  auto out = local.RouteTwoLegs(req, {}, now_, state_);
  ASSERT_TRUE(out.has_value());
  EXPECT_FALSE(out->prefill.has_value());
  auto j = boost::json::parse(DecisionJson(req, &*out, out->decision, {})).as_object();
  const auto& pd = j.at("pd").as_object();
  EXPECT_FALSE(pd.at("split").as_bool());
  EXPECT_EQ(pd.at("prefill_worker"), pd.at("decode_worker"));
  EXPECT_FALSE(pd.contains("transfer_s"));
  EXPECT_EQ(pd.at("threshold_tokens").to_number<std::uint64_t>(), 1u << 20);
  // No name lookup given: workers by id.
  EXPECT_EQ(pd.at("decode_worker").as_string(), "worker " + std::to_string(out->worker));
}

TEST_F(PdRouteTest, PrefillBodyIsVllmsProxyRewrite) {
  SetUp(/*with_roles=*/true);
  auto out = pipeline_->RouteTwoLegs(Prepared(), {}, now_, state_);
  ASSERT_TRUE(out.has_value() && out->prefill.has_value());
  boost::json::object body = boost::json::parse(*out->prefill->prefill_body).as_object();
  EXPECT_EQ(body.at("max_tokens").as_int64(), 1);
  EXPECT_FALSE(body.at("stream").as_bool());
  EXPECT_FALSE(body.contains("stream_options"));
  EXPECT_FALSE(body.contains("min_tokens"));
  EXPECT_TRUE(body.at("kv_transfer_params").at("do_remote_decode").as_bool());
  // The parsed client body keeps what the decode leg must send unchanged.
  EXPECT_EQ(out->prefill->client_body->at("max_tokens").as_int64(), 20);
  EXPECT_TRUE(out->prefill->client_body->at("stream").as_bool());
}

TEST_F(PdRouteTest, ExcludedDecodeWorkerIsNotChosenAgain) {
  SetUp(/*with_roles=*/true);
  PreparedRequest req = Prepared();
  auto first = pipeline_->RouteTwoLegs(req, {}, now_, state_);
  ASSERT_TRUE(first.has_value());
  std::vector<WorkerId> tried = {first->worker};
  auto again = pipeline_->RouteTwoLegs(req, tried, now_, state_);
  ASSERT_TRUE(again.has_value()) << again.error().message;
  EXPECT_NE(again->worker, first->worker);
  EXPECT_NE(again->worker, ids_["p"]);
  ASSERT_TRUE(again->prefill.has_value());
  EXPECT_EQ(again->prefill->worker, ids_["p"]);
}

TEST_F(PdRouteTest, AllMixedFleetInAutoModeRoutesByThePolicy) {
  SetUp(/*with_roles=*/false);
  EXPECT_FALSE(pipeline_->PdActive());
  auto out = pipeline_->RouteTwoLegs(Prepared(), {}, now_, state_);
  ASSERT_TRUE(out.has_value());
  EXPECT_FALSE(out->pd_placed);
  EXPECT_FALSE(out->prefill.has_value());
}

TEST_F(PdRouteTest, ModeOnSplitsAMixedFleetToo) {
  SetUp(/*with_roles=*/false, PipelineOptions::PdMode::kOn);
  auto out = pipeline_->RouteTwoLegs(Prepared(), {}, now_, state_);
  ASSERT_TRUE(out.has_value());
  EXPECT_TRUE(out->pd_placed);
  ASSERT_TRUE(out->prefill.has_value());
  EXPECT_NE(out->prefill->worker, out->worker);
}

TEST_F(PdRouteTest, ModeOffNeverSplits) {
  SetUp(/*with_roles=*/true, PipelineOptions::PdMode::kOff);
  auto out = pipeline_->RouteTwoLegs(Prepared(), {}, now_, state_);
  ASSERT_TRUE(out.has_value());
  EXPECT_FALSE(out->pd_placed);
}

TEST_F(PdRouteTest, FailOpenNeverPicksAPrefillOnlyWorker) {
  SetUp(/*with_roles=*/true, PipelineOptions::PdMode::kAuto, /*inject=*/true);
  PreparedRequest req = Prepared();
  // Exclude both decode workers: only P is left, and fail_open must not send a whole
  // request to a prefill-only worker.
  std::vector<WorkerId> tried = {ids_["d1"], ids_["d2"]};
  auto out = pipeline_->RouteTwoLegs(req, tried, now_, state_);
  EXPECT_FALSE(out.has_value());
  auto open = pipeline_->RouteTwoLegs(req, {}, now_, state_);
  ASSERT_TRUE(open.has_value());
  EXPECT_TRUE(open->fell_back);
  EXPECT_NE(open->worker, ids_["p"]);
}

}  // namespace
}  // namespace kvroute::gateway

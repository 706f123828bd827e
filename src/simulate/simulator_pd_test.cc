// P/D fleets in virtual time (issue 19): the two legs, the pull releasing the prefill's
// pins, the router learning the link, the timed wake-ups, and the presets' rules end to end.
#include <gtest/gtest.h>

#include "engine/kv_transfer.h"
#include "fleet/router_state.h"
#include "simulate/sim_test_util.h"
#include "simulate/simulator.h"

namespace kvroute::simulate {
namespace {

WorkerSpec Kimi(const char* profile, sched::Role role, std::uint32_t budget) {
  WorkerSpec s;
  auto p = engine::LoadProfile(profile);
  EXPECT_TRUE(p.has_value());
  s.profile = *p;
  s.role = role;
  s.config.max_num_batched_tokens = budget;
  s.config.num_gpu_blocks_override = 20000;  // small pool: fast to build
  return s;
}

// Infera's topology, shrunk: one TP4 prefill engine and `decoders` TP2 decode engines.
SimOptions PdFleet(int decoders, sched::PdOptions pd) {
  SimOptions o;
  o.fleet.workers.push_back(Kimi("kimi-k2.6-mi355x-tp4", sched::Role::kPrefill, 4096));
  for (int i = 0; i < decoders; ++i) {
    o.fleet.workers.push_back(Kimi("kimi-k2.6-mi355x-tp2", sched::Role::kDecode, 2048));
  }
  o.policy = *sched::BuiltinPolicy("predicted_latency");  // unused with pd set
  o.model = "sim-model";
  o.pd = pd;
  return o;
}

AgenticSimOptions Sessions(int sessions, int turns) {
  AgenticSimOptions a = testing::SmallAgentic(sessions, turns);
  a.shape.common_prefix_tokens = 2048;
  a.shape.session_prefix_tokens = 1024;
  a.shape.turn_input_tokens = 512;
  a.shape.output_tokens = 32;
  return a;
}

std::size_t Splits(const SimResult& r) {
  std::size_t n = 0;
  for (const PdRecord& p : r.pd) n += p.split ? 1 : 0;
  return n;
}

// llm-d's rule at 1 token splits every request: each one's prefill leg runs on the prefill
// engine, its decode leg pulls the blocks and decodes; pins return to 0, none expires, the
// router's link learner saw every pull, and the decode engines announced the pulled blocks.
TEST(SimulatorPdTest, EverySplitRequestRunsBothLegsAndFreesItsPins) {
  SimOptions o = PdFleet(2, {.rule = sched::PdRule::kNonCachedTokens, .non_cached_tokens = 1});
  Simulator sim(std::move(o), NewAgenticWorkload(Sessions(4, 3)));
  auto r = sim.Run();
  ASSERT_TRUE(r.has_value()) << r.error();
  ASSERT_EQ(r->level.requests.size(), 12u);
  for (const auto& q : r->level.requests) {
    EXPECT_TRUE(q.result.ok) << q.result.error_kind;
    EXPECT_EQ(q.result.output_tokens, 32u);
    EXPECT_GT(q.result.ttft_s, 0);
  }
  ASSERT_EQ(r->pd.size(), 12u);
  EXPECT_EQ(Splits(*r), 12u);
  std::uint64_t learned = 0;
  for (const PdRecord& p : r->pd) {
    EXPECT_EQ(p.prefill, 0u);
    EXPECT_NE(p.decode, 0u);
    EXPECT_TRUE(p.transferred);
    EXPECT_GT(p.transfer_bytes, 0);
    EXPECT_GT(p.transfer_s, 0);
  }
  for (WorkerId d : {1u, 2u}) learned += sim.router_state().Link(d)->samples();
  EXPECT_EQ(learned, 12u);
  EXPECT_EQ(r->pins_expired, 0u);
  EXPECT_EQ(sim.engine(0)->Stats().num_pinned_blocks, 0);
  EXPECT_EQ(sim.engine(0)->Stats().pins_released, 12u);
  EXPECT_EQ(sim.engine(0)->Stats().generation_tokens, 12u);  // one token per prefill leg
  EXPECT_EQ(r->workers[1].stats.generation_tokens + r->workers[2].stats.generation_tokens,
            12u * 32u);
  // Later turns of a session decode where its KV is and pull only the new turn's blocks: the
  // decode engines announced the blocks they pulled (BlockStored), so the index — which the
  // decode worker's choice reads — shows them there.
  for (std::size_t i = 0; i < r->pd.size(); ++i) {
    if (r->level.requests[i].turn == 0) continue;
    EXPECT_LT(r->pd[i].transfer_blocks, r->level.requests[i].result.prompt_tokens / 16 / 2)
        << "request " << i;
  }
}

// One request alone on an idle fleet: the pull took exactly the link model's time for the
// bytes it moved (nothing shared the link), and TTFT contains it.
TEST(SimulatorPdTest, ALonePullTakesTheLinkModelsTime) {
  SimOptions o = PdFleet(1, {.rule = sched::PdRule::kNonCachedTokens, .non_cached_tokens = 1});
  Simulator sim(std::move(o), NewAgenticWorkload(Sessions(1, 1)));
  auto r = sim.Run();
  ASSERT_TRUE(r.has_value()) << r.error();
  ASSERT_EQ(r->pd.size(), 1u);
  const PdRecord& p = r->pd[0];
  ASSERT_TRUE(p.transferred);
  const engine::Profile& decode = sim.engine(1)->profile();
  const std::uint32_t prompt = r->level.requests[0].result.prompt_tokens;
  EXPECT_EQ(p.transfer_blocks, (prompt + 15) / 16);
  EXPECT_DOUBLE_EQ(p.transfer_bytes,
                   p.transfer_blocks * 16.0 * engine::KvTransferBytesPerToken(decode.model, 2));
  const Nanos model = engine::KvTransferTime(p.transfer_bytes, engine::KvTransferLanes(4, 2),
                                             *decode.FindLink(""));
  EXPECT_NEAR(p.transfer_s, ToSeconds(model), 1e-9);
  EXPECT_GT(r->level.requests[0].result.ttft_s, p.transfer_s);
  // The router predicted that transfer for an idle link (seeded from the same spec).
  EXPECT_NEAR(p.predicted_transfer_s, p.transfer_s, 1e-6);
}

// The presets at their extremes: llm-d's default (0 = never) and a Dynamo cap above every
// prompt split nothing; the requests run aggregated on the decode engines.
TEST(SimulatorPdTest, PresetsThatNeverSplitServeAggregatedOnTheDecodeWorkers) {
  for (sched::PdOptions pd : {sched::PdOptions{.rule = sched::PdRule::kNonCachedTokens},
                              sched::PdOptions{.rule = sched::PdRule::kTokenCap,
                                               .token_cap = 1000000}}) {
    Simulator sim(PdFleet(2, pd), NewAgenticWorkload(Sessions(3, 2)));
    auto r = sim.Run();
    ASSERT_TRUE(r.has_value()) << r.error();
    EXPECT_EQ(Splits(*r), 0u);
    for (const PdRecord& p : r->pd) EXPECT_NE(p.decode, 0u);  // never on the prefill worker
    for (const auto& q : r->level.requests) EXPECT_TRUE(q.result.ok);
    EXPECT_EQ(r->workers[0].routed, 0u);
  }
}

// The cost rule on the same fleet serves everything and is deterministic.
TEST(SimulatorPdTest, CostRuleServesEverythingDeterministically) {
  auto run = [] {
    Simulator sim(PdFleet(2, {}), NewAgenticWorkload(Sessions(4, 3)));
    return sim.Run();
  };
  auto a = run(), b = run();
  ASSERT_TRUE(a.has_value() && b.has_value());
  for (const auto& q : a->level.requests) EXPECT_TRUE(q.result.ok);
  ASSERT_EQ(a->level.requests.size(), b->level.requests.size());
  for (std::size_t i = 0; i < a->level.requests.size(); ++i) {
    EXPECT_EQ(a->level.requests[i].result.ttft_s, b->level.requests[i].result.ttft_s);
    EXPECT_EQ(a->pd[i].split, b->pd[i].split);
  }
}

}  // namespace
}  // namespace kvroute::simulate

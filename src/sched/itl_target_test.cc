// The default policy's ITL guard against the per-user target the operator runs for (issues
// 5/6, gateway key scheduler.itl_slo_s, given to the policy as RequestProfile::itl_slo_s).
// Live, the first turn of every agentic session went to the worker already holding the
// 20k-token common prefix (it saves ~12k tokens of prefill), however many sessions it was
// already decoding: predicted_ttft does not grow with decode load, and the preset's own
// itl_slo_s of 0.1 s is three times a 30 tokens/s/user target. With the target as the SLO,
// the holder takes new sessions only while its predicted ITL stays under it. Since session 5
// the preset's decode_slowdown scorer also weighs the decode load a turn 0 joins
// (decode_slowdown_test.cc), so these tests give the other workers the same load when they
// test the guard alone.
#include <gtest/gtest.h>

#include <vector>

#include "sched/registry.h"
#include "sched/test_util.h"

namespace kvroute::sched {
namespace {

using testing::Request;
using testing::View;
using testing::Worker;

constexpr std::uint64_t kSessionTokens = 40000;  // KV of one decoding session

// Four workers with the default profile's seeded shape (14 ms per step + 5e-8 s per KV token:
// 2 ms more per 40k-token session); w0 holds the 20,000-token common prefix (1,250 blocks)
// and decodes `sessions` sessions. The request is a turn 0 of 32,000 tokens (ratio 0.62).
class ItlTargetTest : public ::testing::Test {
 protected:
  // `sessions` decoding on w0, `others` on each of w1..w3.
  Decision Route(std::uint32_t sessions, std::optional<double> itl_slo_s,
                 std::uint32_t others = 0) {
    RequestProfile r = Request(32000);
    r.predicted_output_tokens = 900;
    r.itl_slo_s = itl_slo_s;
    r.cache_views = {View(0, 1250)};
    std::vector<WorkerSnapshot> ws;
    for (WorkerId id : {0u, 1u, 2u, 3u}) {
      WorkerSnapshot w = Worker(id);
      // Room for 12 sessions (480k tokens): the KV-wait term stays out of these tests.
      w.kv_capacity_blocks = 40000;
      w.prefill_tokens_per_s = 17000;
      w.decode_step = StepTimeModel{.base_s = 0.014, .per_sequence_s = 0, .per_kv_token_s = 5e-8};
      ws.push_back(w);
    }
    for (WorkerSnapshot& w : ws) {
      const std::uint32_t n = w.id == 0 ? sessions : others;
      w.inflight_requests = n;
      w.active_kv_blocks = n * kSessionTokens / 16;
    }
    auto d = policy_->Decide(r, ws, state_);
    EXPECT_TRUE(d.has_value()) << (d ? "" : d.error().message);
    return d ? *d : Decision{};
  }

  std::shared_ptr<const Policy> policy_ = BuiltinPolicy("predicted_latency").value();
  PolicyState state_{3};
};

TEST_F(ItlTargetTest, PrefixHolderTakesATurnZeroWhileUnderTheTarget) {
  // 4 sessions on every worker: 14 + 8 + 0.65 ms ~ 23 ms < 33 ms, and the holder saves the
  // prefill of the common prefix.
  Decision d = Route(4, 0.033, /*others=*/4);
  ASSERT_TRUE(d.chosen.has_value());
  EXPECT_EQ(*d.chosen, 0u);
}

TEST_F(ItlTargetTest, TurnZeroGoesElsewhereOnceTheHolderWouldExceedTheTarget) {
  // 12 sessions: 14 + 24 + 0.65 ms ~ 39 ms > 33 ms; an idle worker predicts ~15 ms.
  Decision d = Route(12, 0.033);
  ASSERT_TRUE(d.chosen.has_value());
  EXPECT_NE(*d.chosen, 0u);
}

TEST_F(ItlTargetTest, PresetsOwnSloKeepsTheHolderEligibleBeyondTheTarget) {
  // 12 sessions on every worker under the preset's 0.1 s: nobody is dropped, and the holder
  // wins on prefill saved.
  Decision d = Route(12, std::nullopt, /*others=*/12);
  ASSERT_TRUE(d.chosen.has_value());
  EXPECT_EQ(*d.chosen, 0u);
}

TEST_F(ItlTargetTest, UnderThePresetsOwnSloTurnZeroStaysOnABusyHolderWithinTheDerivedBound) {
  // 12 sessions on the holder, idle workers elsewhere, 0.1 s: the guard keeps the holder, and
  // its predicted TTFT exceeds an idle worker's by less than the common prefix it saves, so
  // prefix_affinity keeps it (the decode slowdown ranks only what the filters kept; before
  // the derived bound, issue 15, the slowdown moved this turn 0 to an idle worker).
  Decision d = Route(12, std::nullopt);
  ASSERT_TRUE(d.chosen.has_value());
  EXPECT_EQ(*d.chosen, 0u);
}

}  // namespace
}  // namespace kvroute::sched

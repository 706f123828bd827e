// PullLinkFeed (gateway/pd_link_feed.h): the decode worker's link learned from the NIXL
// totals of two scrapes, against the real fleet::RouterState and its LinkLearner.
#include "gateway/pd_link_feed.h"

#include <gtest/gtest.h>

#include "engine/kv_transfer.h"
#include "fleet/router_state.h"

namespace kvroute::gateway {
namespace {

using std::chrono::seconds;

fleet::EngineMetrics TotalsOfPulls(double seconds_sum, double count, double bytes) {
  fleet::EngineMetrics m;
  m.kv_pull_seconds_sum = seconds_sum;
  m.kv_pull_count = count;
  m.kv_pull_bytes_sum = bytes;
  return m;
}

class PullLinkFeedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (auto [name, role] : {std::pair{"p", sched::Role::kPrefill},
                              std::pair{"d", sched::Role::kDecode}}) {
      fleet::WorkerSpec spec;
      spec.name = name;
      spec.base_url = "http://127.0.0.1:1";
      spec.models = {"m"};
      spec.role = role;
      auto id = state_.Add(spec, seconds(1));
      ASSERT_TRUE(id.has_value()) << id.error();
      (role == sched::Role::kPrefill ? prefill_ : decode_) = *id;
    }
  }

  static fleet::EngineMetrics Totals(double seconds_sum, double count, double bytes) {
    return TotalsOfPulls(seconds_sum, count, bytes);
  }

  double LaneBandwidth() const { return *state_.Link(decode_)->lane_bytes_per_s(); }

  fleet::RouterState state_;
  PullLinkFeed feed_{&state_};
  WorkerId prefill_ = 0;
  WorkerId decode_ = 0;
};

TEST_F(PullLinkFeedTest, PullsBetweenTwoScrapesTeachTheirMeanBandwidth) {
  const double seed = LaneBandwidth();
  const double latency = state_.Link(decode_)->latency_s();
  EXPECT_FALSE(feed_.OnScrape(decode_, Totals(3, 10, 5e9)));  // the baseline
  // Ten pulls of 1e9 bytes each, 2 s each: far slower than the seed link.
  ASSERT_TRUE(feed_.OnScrape(decode_, Totals(23, 20, 15e9)));
  EXPECT_EQ(feed_.samples(), 1u);
  const std::uint32_t lanes = engine::KvTransferLanes(2, 2);  // both on the default TP2 profile
  const double observed = 1e9 / lanes / (2.0 - latency);
  ASSERT_LT(observed, seed);
  const double learned = LaneBandwidth();
  EXPECT_LT(learned, seed);
  EXPECT_GT(learned, observed);
  EXPECT_EQ(state_.Link(decode_)->samples(), 1u);
}

TEST_F(PullLinkFeedTest, NothingPulledOrACounterResetTeachesNothing) {
  const double seed = LaneBandwidth();
  EXPECT_FALSE(feed_.OnScrape(decode_, Totals(3, 10, 5e9)));
  EXPECT_FALSE(feed_.OnScrape(decode_, Totals(3, 10, 5e9)));   // no pull since
  EXPECT_FALSE(feed_.OnScrape(decode_, Totals(0.5, 2, 1e9)));  // the engine restarted
  EXPECT_EQ(feed_.samples(), 0u);
  EXPECT_DOUBLE_EQ(LaneBandwidth(), seed);
  // The restart's totals are the new baseline.
  EXPECT_TRUE(feed_.OnScrape(decode_, Totals(1.5, 4, 3e9)));
}

TEST_F(PullLinkFeedTest, ScrapeWithoutNixlHistogramsTeachesNothing) {
  fleet::EngineMetrics plain;
  plain.num_running = 3;
  EXPECT_FALSE(feed_.OnScrape(decode_, plain));
  EXPECT_FALSE(feed_.OnScrape(decode_, plain));
  EXPECT_EQ(feed_.samples(), 0u);
}

// A `kvroute sim --speedup 10` reports its engine's model time: pulls at the (sped-up) seed's
// bandwidth must leave the link where it was, not 10x slower.
TEST(PullLinkFeed, ASpedUpSimsModelTimeIsDividedByItsSpeedup) {
  fleet::RouterState state;
  WorkerId decode = 0;
  for (auto [name, role] : {std::pair{"p", sched::Role::kPrefill},
                            std::pair{"d", sched::Role::kDecode}}) {
    fleet::WorkerSpec spec;
    spec.name = name;
    spec.base_url = "http://127.0.0.1:1";
    spec.models = {"m"};
    spec.role = role;
    spec.profile_speedup = 10;
    auto id = state.Add(spec, seconds(1));
    ASSERT_TRUE(id.has_value()) << id.error();
    if (role == sched::Role::kDecode) decode = *id;
  }
  const fleet::LinkLearner seeded = *state.Link(decode);
  const double lanes = engine::KvTransferLanes(2, 2);
  // One pull of 1e9 bytes at exactly the seed's wall-time rate, in model seconds (x10).
  const double wall = seeded.latency_s() + 1e9 / (lanes * *seeded.lane_bytes_per_s());
  PullLinkFeed feed(&state);
  feed.OnScrape(decode, TotalsOfPulls(0, 0, 0));
  ASSERT_TRUE(feed.OnScrape(decode, TotalsOfPulls(wall * 10, 1, 1e9)));
  EXPECT_NEAR(*state.Link(decode)->lane_bytes_per_s() / *seeded.lane_bytes_per_s(), 1.0, 1e-6);
}

}  // namespace
}  // namespace kvroute::gateway

// RemoteBookings (replica_remote_bookings.h) against a real fleet::RouterState and
// kv::PredictedBlocks: a sibling's bookings add to the worker's load as local ones do, and
// go on release, on disconnect and by their TTL.
#include "gateway/replica_remote_bookings.h"

#include <gtest/gtest.h>

#include "fleet/router_state.h"
#include "kv/index/approx_predicted.h"

namespace kvroute::gateway {
namespace {

using std::chrono::seconds;

class RemoteBookingsTest : public ::testing::Test {
 protected:
  RemoteBookingsTest() {
    for (const char* n : {"w0", "w1"}) {
      fleet::WorkerSpec s;
      s.name = n;
      s.base_url = "http://127.0.0.1:1";
      s.models = {"m"};
      EXPECT_TRUE(state_.Add(s, seconds(0)).has_value());
    }
  }
  static BookedDelta Booked(RequestId id, std::string worker = "w1") {
    return {.id = id, .worker = std::move(worker), .prompt_tokens = 1000,
            .uncached_tokens = 600, .kv_blocks = 70};
  }
  fleet::WorkerLoad Load(WorkerId w) const { return state_.load().Load(w); }

  fleet::RouterState state_;
  kv::PredictedBlocks predicted_;
  RemoteBookings remote_{&state_, &predicted_, seconds(300)};
};

TEST_F(RemoteBookingsTest, ABookedDeltaLoadsTheNamedWorkerAsALocalBookingWould) {
  remote_.Apply(7, {Booked(1)}, seconds(1));
  EXPECT_EQ(Load(1).inflight_requests, 1u);
  EXPECT_EQ(Load(1).pending_prefill_tokens, 600u);
  EXPECT_EQ(Load(1).active_kv_blocks, 70u);
  EXPECT_EQ(Load(0).inflight_requests, 0u);
  remote_.Apply(7, {FirstTokenDelta{1}}, seconds(2));
  EXPECT_EQ(Load(1).pending_prefill_tokens, 0u);
  EXPECT_EQ(Load(1).inflight_requests, 1u);
  remote_.Apply(7, {ReleasedDelta{1}}, seconds(3));
  EXPECT_EQ(Load(1), fleet::WorkerLoad{});
  EXPECT_EQ(remote_.Counters().held, 0u);
}

TEST_F(RemoteBookingsTest, RemoteBookingsTeachNoRates) {
  const auto before = state_.Snapshot(seconds(0), "")[1].prefill_tokens_per_s;
  remote_.Apply(7, {Booked(1)}, seconds(1));
  remote_.Apply(7, {FirstTokenDelta{1}}, seconds(1) + std::chrono::milliseconds(1));
  remote_.Apply(7, {ReleasedDelta{1}}, seconds(2));
  EXPECT_EQ(state_.Snapshot(seconds(3), "")[1].prefill_tokens_per_s, before);
  EXPECT_EQ(state_.load().Calibration(1).samples, 0u);
}

TEST_F(RemoteBookingsTest, TheSameIdFromTwoSourcesIsTwoRequestsAndDuplicatesAreIgnored) {
  remote_.Apply(7, {Booked(1), Booked(1)}, seconds(1));
  remote_.Apply(8, {Booked(1)}, seconds(1));
  EXPECT_EQ(Load(1).inflight_requests, 2u);
  remote_.Apply(8, {ReleasedDelta{1}}, seconds(2));
  EXPECT_EQ(Load(1).inflight_requests, 1u);
  EXPECT_EQ(remote_.HeldFrom(7), 1u);
}

TEST_F(RemoteBookingsTest, DisconnectDropsEveryBookingOfThatSourceOnly) {
  remote_.Apply(7, {Booked(1), Booked(2, "w0"), Booked(3)}, seconds(1));
  remote_.Apply(8, {Booked(1)}, seconds(1));
  EXPECT_EQ(remote_.DropSource(7, seconds(2)), 3u);
  EXPECT_EQ(Load(0).inflight_requests, 0u);
  EXPECT_EQ(Load(1).inflight_requests, 1u);
  remote_.Apply(7, {ReleasedDelta{1}}, seconds(3));  // a late release changes nothing
  EXPECT_EQ(Load(1).inflight_requests, 1u);
}

TEST_F(RemoteBookingsTest, ABookingWhoseReleaseNeverCameExpiresAfterTheTtl) {
  remote_.Apply(7, {Booked(1)}, seconds(10));
  remote_.Apply(7, {Booked(2)}, seconds(200));
  EXPECT_EQ(remote_.Expire(seconds(309)), 0u);
  EXPECT_EQ(remote_.Expire(seconds(310)), 1u);
  EXPECT_EQ(Load(1).inflight_requests, 1u);
  EXPECT_EQ(remote_.Counters().expired, 1u);
}

TEST_F(RemoteBookingsTest, AReplayedBookingPastItsFirstTokenHoldsNoPendingPrefill) {
  BookedDelta b = Booked(1);
  b.first_token_seen = true;
  remote_.Apply(7, {b}, seconds(1));
  EXPECT_EQ(Load(1).inflight_requests, 1u);
  EXPECT_EQ(Load(1).pending_prefill_tokens, 0u);
}

TEST_F(RemoteBookingsTest, UnknownWorkersAreSkippedAndCounted) {
  remote_.Apply(7, {Booked(1, "gone"), PredictedDelta{.worker = "gone", .keys = {1}}},
                seconds(1));
  EXPECT_EQ(remote_.Counters().unknown_worker, 2u);
  EXPECT_EQ(remote_.Counters().held, 0u);
}

TEST_F(RemoteBookingsTest, PredictedBlocksLandOnTheNamedWorker) {
  remote_.Apply(7, {PredictedDelta{.worker = "w1", .keys = {11, 12, 13}}}, seconds(1));
  const std::vector<kv::BlockKey> keys{11, 12, 13, 14};
  EXPECT_EQ(predicted_.Lookup(keys, seconds(1)),
            (std::vector<kv::PredictedMatch>{{.worker = 1, .depth = 3}}));
}

TEST_F(RemoteBookingsTest, RemoteIdsNeverCollideWithLocalOnes) {
  EXPECT_TRUE(IsRemoteBookingId(kRemoteBookingBit | 1));
  EXPECT_FALSE(IsRemoteBookingId(1));
  EXPECT_FALSE(IsRemoteBookingId((RequestId{1} << 63) | 1));  // a P/D prefill leg, the EPP
  EXPECT_FALSE(IsRemoteBookingId((RequestId{1} << 63) | kRemoteBookingBit));
}

}  // namespace
}  // namespace kvroute::gateway

#include "kv/index/index_overlay.h"

#include <gtest/gtest.h>

#include "kv/index/index_test_util.h"

namespace kvroute::kv {
namespace {

using std::chrono::seconds;
using testing::Batch;
using testing::ByWorker;
using testing::Match;
using testing::PromptKeys;
using testing::Store;

class IndexOverlayTest : public ::testing::Test {
 protected:
  BlockKeyer keyer_;
  KvIndex index_{keyer_};
  PredictedBlocks predicted_{{.ttl = seconds(5), .default_capacity_blocks = 1000}};
};

// Predicted blocks are GPU blocks, so every tier's "this tier or a faster one" depth rises.
TEST_F(IndexOverlayTest, PredictionRaisesTheGpuDepthAndEverySlowerTiersWithIt) {
  index_.ApplyBatch(
      1, Batch({Store({1}, std::nullopt, {1}), Store({1, 2}, std::nullopt, {1, 2}, "CPU")}));
  auto keys = PromptKeys(keyer_, {1, 2, 3, 4});
  EXPECT_EQ(ByWorker(index_.Lookup(keys))[1], Match(1, 1, 2, 2, 2, 2));
  predicted_.Record(1, keys, Nanos(0));
  auto m = ByWorker(LookupWithPredictions(index_, predicted_, keys, seconds(1)));
  EXPECT_EQ(m[1], Match(1, 4, 4, 4, 4, 4));
}

// A prediction shallower than the events keeps the deeper lower-tier depths.
TEST_F(IndexOverlayTest, AShallowPredictionKeepsTheEventIndexsLowerTierDepths) {
  index_.ApplyBatch(1, Batch({Store({1, 2, 3}, std::nullopt, {1, 2, 3}, "CPU")}));
  auto keys = PromptKeys(keyer_, {1, 2, 3});
  predicted_.Record(1, std::span(keys).first(1), Nanos(0));
  EXPECT_EQ(ByWorker(LookupWithPredictions(index_, predicted_, keys, seconds(1)))[1],
            Match(1, 1, 3, 3, 3, 3));
}

TEST_F(IndexOverlayTest, EventDepthWinsWhenDeeperThanPrediction) {
  index_.ApplyBatch(1, Batch({Store({1, 2, 3}, std::nullopt, {1, 2, 3})}));
  auto keys = PromptKeys(keyer_, {1, 2, 3});
  predicted_.Record(1, std::span(keys).first(1), Nanos(0));
  EXPECT_EQ(ByWorker(LookupWithPredictions(index_, predicted_, keys, seconds(1)))[1].depth[0], 3u);
}

TEST_F(IndexOverlayTest, PredictedOnlyWorkerIsAddedAndExpires) {
  auto keys = PromptKeys(keyer_, {1, 2});
  predicted_.Record(7, keys, Nanos(0));
  EXPECT_EQ(ByWorker(LookupWithPredictions(index_, predicted_, keys, seconds(1)))[7],
            Match(7, 2, 2, 2, 2, 2));
  EXPECT_TRUE(LookupWithPredictions(index_, predicted_, keys, seconds(6)).empty());
}

TEST_F(IndexOverlayTest, StaleFlagComesFromTheEventIndex) {
  index_.ApplyBatch(1, Batch({Store({1}, std::nullopt, {1})}));
  index_.MarkStale(1);
  auto keys = PromptKeys(keyer_, {1, 2});
  predicted_.Record(1, keys, Nanos(0));
  EXPECT_EQ(ByWorker(LookupWithPredictions(index_, predicted_, keys, seconds(1)))[1],
            Match(1, 2, 2, 2, 2, 2, true));
}

}  // namespace
}  // namespace kvroute::kv

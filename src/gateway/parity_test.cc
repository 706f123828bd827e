#include "gateway/parity.h"

#include <gtest/gtest.h>

#include <map>

namespace kvroute::gateway {
namespace {

using std::chrono::seconds;

// A fake index: per worker, how many of each request's blocks it confirms.
struct FakeIndex {
  std::uint32_t depth = 0;  // returned for every lookup
  int lookups = 0;
  ParityChecker::LookupFn Fn() {
    return [this](WorkerId, std::span<const kv::BlockKey> keys) {
      ++lookups;
      return std::min<std::uint32_t>(depth, static_cast<std::uint32_t>(keys.size()));
    };
  }
};

std::vector<kv::BlockKey> Keys(std::size_t n, kv::BlockKey base = 100) {
  std::vector<kv::BlockKey> k(n);
  for (std::size_t i = 0; i < n; ++i) k[i] = base + i;
  return k;
}

ParityIndexView Live(std::uint32_t event_block_size = 16) {
  return {.keyer_block_size = 16,
          .last_event_block_size = event_block_size,
          .batches = 100,
          .blocks_stored = 1000};
}

class ParityTest : public ::testing::Test {
 protected:
  ParityOptions opts_{.window = seconds(2), .warn_ratio = 0.5, .min_samples = 10};
  ParityChecker checker_{opts_, ParityIndexView{.keyer_block_size = 16}};
  FakeIndex index_;

  // Routes n requests of `blocks` blocks each with their first token at t; returns the
  // warnings a Check at `check_at` gives.
  std::optional<ParityWarning> Run(int n, std::size_t blocks, Nanos t, Nanos check_at,
                                   const ParityIndexView& view, RequestId base = 0) {
    for (int i = 0; i < n; ++i) {
      checker_.OnRouted(base + i, 1, Keys(blocks), t);
      checker_.OnFirstToken(base + i, t);
    }
    return checker_.Check(check_at, index_.Fn(), view);
  }
};

TEST_F(ParityTest, FullyConfirmedRequestsAreFinalAtOnce) {
  index_.depth = 8;
  EXPECT_FALSE(Run(5, 8, seconds(1), seconds(1), Live()).has_value());
  ParityCounters c = checker_.counters();
  EXPECT_EQ(c.samples, 5u);
  EXPECT_EQ(c.predicted_blocks, 40u);
  EXPECT_EQ(c.confirmed_blocks, 40u);
  EXPECT_DOUBLE_EQ(c.ratio(), 1.0);
}

TEST_F(ParityTest, PartialConfirmationWaitsForTheWindowAndKeepsTheBestDepth) {
  index_.depth = 6;
  Run(1, 8, seconds(1), seconds(2), Live());
  EXPECT_EQ(checker_.counters().samples, 0u);  // still inside the window
  index_.depth = 2;                            // evicted meanwhile
  checker_.Check(seconds(3), index_.Fn(), Live());
  ParityCounters c = checker_.counters();
  EXPECT_EQ(c.samples, 1u);
  EXPECT_EQ(c.confirmed_blocks, 6u);
}

TEST_F(ParityTest, NothingIsCheckedBeforeTheFirstToken) {
  index_.depth = 8;
  checker_.OnRouted(1, 1, Keys(8), seconds(0));
  checker_.Check(seconds(1), index_.Fn(), Live());
  EXPECT_EQ(index_.lookups, 0);
  EXPECT_EQ(checker_.counters().samples, 0u);
}

TEST_F(ParityTest, FailedAndNeverStartedRequestsAreDropped) {
  checker_.OnRouted(1, 1, Keys(8), seconds(0));
  checker_.OnFailed(1);
  checker_.OnRouted(2, 1, Keys(8), seconds(0));
  checker_.Check(seconds(0) + opts_.max_wait_first_token + seconds(1), index_.Fn(), Live());
  ParityCounters c = checker_.counters();
  EXPECT_EQ(c.samples, 0u);
  EXPECT_EQ(c.dropped, 1u);
}

TEST_F(ParityTest, RequestsWithoutFullBlocksAreNotTracked) {
  checker_.OnRouted(1, 1, {}, seconds(0));
  checker_.OnFirstToken(1, seconds(0));
  checker_.Check(seconds(10), index_.Fn(), Live());
  EXPECT_EQ(checker_.counters().samples, 0u);
}

TEST_F(ParityTest, NoWarningBeforeEnoughSamples) {
  index_.depth = 0;
  EXPECT_FALSE(Run(9, 4, seconds(0), seconds(5), Live()).has_value());
}

TEST_F(ParityTest, WarnsOnceNamingABlockSizeMismatch) {
  index_.depth = 0;
  auto w = Run(10, 4, seconds(0), seconds(5), Live(/*event_block_size=*/32));
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->cause, ParityCause::kBlockSizeMismatch);
  EXPECT_EQ(w->samples, 10u);
  EXPECT_NE(w->message.find("block_size 32"), std::string::npos) << w->message;
  EXPECT_FALSE(Run(10, 4, seconds(5), seconds(10), Live(32), 100).has_value());  // once
  EXPECT_EQ(checker_.counters().warnings, 1u);
}

TEST_F(ParityTest, NamesSilentFeedWhenNoBatchArrived) {
  auto w = Run(10, 4, seconds(0), seconds(5), ParityIndexView{.keyer_block_size = 16});
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->cause, ParityCause::kNoEvents);
}

TEST_F(ParityTest, NamesTokenizerMismatchWhenFirstBlocksNeverMatch) {
  index_.depth = 0;
  auto w = Run(10, 4, seconds(0), seconds(5), Live());
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->cause, ParityCause::kTokenizerMismatch);
}

TEST_F(ParityTest, NamesEvictionPressureWhenPrefixesMatchOnlyPartly) {
  index_.depth = 1;  // block 0 confirmed, the rest gone
  auto w = Run(10, 8, seconds(0), seconds(5), Live());
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->cause, ParityCause::kEvictionPressure);
  EXPECT_NEAR(w->ratio, 1.0 / 8, 1e-12);
}

TEST_F(ParityTest, RearmsAfterTheRatioRecovers) {
  index_.depth = 0;
  ASSERT_TRUE(Run(10, 4, seconds(0), seconds(5), Live()).has_value());
  index_.depth = 4;
  EXPECT_FALSE(Run(10, 4, seconds(5), seconds(5), Live(), 100).has_value());
  index_.depth = 0;
  EXPECT_TRUE(Run(10, 4, seconds(6), seconds(10), Live(), 200).has_value());
  EXPECT_EQ(checker_.counters().warnings, 2u);
}

// Per worker: worker 1 confirms every block, the others none.
class PerWorkerParityTest : public ParityTest {
 protected:
  ParityChecker::LookupFn Lookup() {
    return [](WorkerId w, std::span<const kv::BlockKey> keys) {
      return w == 1 ? static_cast<std::uint32_t>(keys.size()) : 0u;
    };
  }
  void Route(WorkerId worker, int n, RequestId base) {
    for (int i = 0; i < n; ++i) {
      checker_.OnRouted(base + i, worker, Keys(4), seconds(0));
      checker_.OnFirstToken(base + i, seconds(0));
    }
  }
  std::map<WorkerId, ParityIndexView> views_;
  ParityChecker::WorkerViewFn Views() {
    return [this](WorkerId w) { return views_.contains(w) ? views_[w] : Live(); };
  }
};

TEST_F(PerWorkerParityTest, NamesOnlyTheWorkerWhoseEventsNeverConfirm) {
  Route(1, 30, 0);
  Route(2, 10, 100);
  ParityReport r = checker_.CheckAll(seconds(5), Lookup(), Live(), Views());
  ASSERT_EQ(r.workers.size(), 1u);
  EXPECT_EQ(r.workers[0].worker, WorkerId{2});
  EXPECT_EQ(r.workers[0].cause, ParityCause::kTokenizerMismatch);
  auto per = checker_.WorkerCounters();
  EXPECT_DOUBLE_EQ(per.at(1).ratio(), 1.0);
  EXPECT_DOUBLE_EQ(per.at(2).ratio(), 0.0);
  EXPECT_EQ(per.at(2).warnings, 1u);
}

TEST_F(PerWorkerParityTest, EachWorkersCauseComesFromItsOwnFeed) {
  views_[2] = Live(/*event_block_size=*/32);
  views_[3] = ParityIndexView{.keyer_block_size = 16};  // its feed never delivered a batch
  Route(2, 10, 0);
  Route(3, 10, 100);
  ParityReport r = checker_.CheckAll(seconds(5), Lookup(), Live(), Views());
  ASSERT_EQ(r.workers.size(), 2u);
  std::map<WorkerId, ParityCause> causes;
  for (const auto& w : r.workers) causes[*w.worker] = w.cause;
  EXPECT_EQ(causes.at(2), ParityCause::kBlockSizeMismatch);
  EXPECT_EQ(causes.at(3), ParityCause::kNoEvents);
}

TEST_F(PerWorkerParityTest, AWorkerIsWarnedAboutOncePerEpisode) {
  Route(2, 10, 0);
  EXPECT_EQ(checker_.CheckAll(seconds(5), Lookup(), Live(), Views()).workers.size(), 1u);
  Route(2, 10, 100);
  EXPECT_TRUE(checker_.CheckAll(seconds(10), Lookup(), Live(), Views()).workers.empty());
}

TEST_F(ParityTest, PendingRequestsAreBounded) {
  ParityChecker small({.max_pending = 3});
  for (RequestId id = 0; id < 5; ++id) small.OnRouted(id, 1, Keys(2), seconds(0));
  EXPECT_EQ(small.counters().dropped, 2u);
}

}  // namespace
}  // namespace kvroute::gateway

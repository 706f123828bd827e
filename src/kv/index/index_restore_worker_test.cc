// RestoreWorker: one worker of a parsed snapshot merged into a live index (the warm start of a
// worker that joins a replica after its start). What it must and must not do: credit the
// target id with the worker's blocks and nothing else, keep the engine-hash map (or keyed
// mode) working for later events, refuse a target that already holds blocks and a snapshot
// that disagrees with the index, and leave the index unchanged when it refuses. The
// randomized union and byte-identity checks are in index_differential_test.cc.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstring>
#include <map>
#include <memory>

#include "kv/index/index.h"
#include "kv/index/index_snapshot.h"
#include "kv/index/index_test_util.h"

namespace kvroute::kv {
namespace {

using testing::Batch;
using testing::ByWorker;
using testing::GpuPrefix;
using testing::Match;
using testing::PromptKeys;
using testing::Remove;
using testing::Store;

class RestoreWorkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Worker 1: engine hashes of its own (an engine map), a CPU copy, a LoRA block; its
    // batches came with sequence numbers (a KV-event feed), the last one 4.
    sibling_.ApplyBatch(1, Batch({Store({11, 12, 13}, std::nullopt, {1, 2, 3}),
                                  Store({12}, 11, {2}, "CPU")}), 3);
    sibling_.ApplyBatch(1, Batch({Store({19}, std::nullopt, {9}, "GPU", "lora-x")}), 4);
    // Worker 2: stale, sharing worker 1's first block.
    sibling_.ApplyBatch(2, Batch({Store({21, 22}, std::nullopt, {1, 5})}));
    sibling_.MarkStale(2);
    // Worker 3: publishes kvroute's own keys (no engine map).
    const auto k = PromptKeys(keyer_, {1, 2, 7});
    sibling_.ApplyBatch(3, Batch({Store({k[0], k[1], k[2]}, std::nullopt, {1, 2, 7})}));
    image_ = sibling_.Dump();
    auto parsed = IndexSnapshot::Parse(image_, keyer_);
    ASSERT_TRUE(parsed.has_value()) << parsed.error();
    snapshot_ = std::make_unique<IndexSnapshot>(*parsed);
  }
  std::map<WorkerId, WorkerMatch> Look(const KvIndex& index, std::vector<std::uint32_t> p,
                                       const std::string& lora = "") {
    return ByWorker(index.Lookup(PromptKeys(keyer_, p, lora)));
  }
  static void Reseal(std::string* image) {
    std::uint64_t sum = XXH3_64bits(image->data(), image->size() - 8);
    std::memcpy(image->data() + image->size() - 8, &sum, 8);
  }

  BlockKeyer keyer_;
  KvIndex sibling_{keyer_};
  std::string image_;
  std::unique_ptr<IndexSnapshot> snapshot_;
};

TEST_F(RestoreWorkerTest, ParsedSnapshotDescribesItsWorkers) {
  EXPECT_EQ(snapshot_->workers(), (std::vector<WorkerId>{1, 2, 3}));
  EXPECT_EQ(snapshot_->entries(1), 4u);  // blocks 1, 2, 3 and the LoRA block
  EXPECT_EQ(snapshot_->entries(2), 2u);
  EXPECT_EQ(snapshot_->entries(4), 0u);
  EXPECT_FALSE(snapshot_->has_worker(4));
  EXPECT_EQ(snapshot_->block_size(), keyer_.block_size());
}

TEST_F(RestoreWorkerTest, EveryWorkerMergedIntoAnEmptyIndexEqualsTheImage) {
  KvIndex merged(keyer_);
  for (WorkerId w : snapshot_->workers()) {
    auto r = merged.RestoreWorker(*snapshot_, w, w);
    ASSERT_TRUE(r.has_value()) << r.error();
    EXPECT_EQ(*r, snapshot_->entries(w));
  }
  EXPECT_EQ(merged.Dump(), image_);
}

TEST_F(RestoreWorkerTest, MergeUnderAnotherIdCreditsOnlyTheTarget) {
  KvIndex live(keyer_);
  live.ApplyBatch(5, Batch({Store({51, 52}, std::nullopt, {1, 2})}));
  ASSERT_TRUE(live.RestoreWorker(*snapshot_, 1, 7).has_value());
  EXPECT_EQ(Look(live, {1, 2, 3}),
            (std::map<WorkerId, WorkerMatch>{{5, Match(5, 2, 2, 2, 2, 2)},
                                             {7, Match(7, 3, 3, 3, 3, 3)}}));
  EXPECT_EQ(Look(live, {9}, "lora-x"), (std::map<WorkerId, WorkerMatch>{{7, GpuPrefix(7, 1)}}));
  // Only worker 1 came: worker 2 and 3 stay unknown here.
  EXPECT_EQ(live.stats().workers, 2u);
  EXPECT_FALSE(Look(live, {1, 5}).contains(2));
}

TEST_F(RestoreWorkerTest, TheEngineMapComesAlongForLaterEvents) {
  KvIndex live(keyer_);
  ASSERT_TRUE(live.RestoreWorker(*snapshot_, 1, 7).has_value());
  // The engine's own hashes resolve: a removal and a continuation from hash 13.
  live.ApplyBatch(7, Batch({Remove({12}, "CPU"), Remove({13}), Store({14}, 12, {4})}));
  EXPECT_EQ(live.counters().unknown_removals, 0u);
  EXPECT_EQ(live.counters().unknown_parent_runs, 0u);
  EXPECT_EQ(Look(live, {1, 2, 4}).at(7), Match(7, 3, 3, 3, 3, 3));
  EXPECT_EQ(Look(live, {1, 2, 3}).at(7), Match(7, 2, 2, 2, 2, 2));
  // A keyed worker stays keyed: no engine-map entries, and its keys still resolve.
  ASSERT_TRUE(live.RestoreWorker(*snapshot_, 3, 8).has_value());
  EXPECT_EQ(live.stats().engine_hashes, 4u + 3u);  // worker 7's map + worker 8's keys
  const auto k = PromptKeys(keyer_, {1, 2, 7});
  live.ApplyBatch(8, Batch({Remove({k[2]})}));
  EXPECT_EQ(live.counters().unknown_removals, 0u);
  EXPECT_EQ(Look(live, {1, 2, 7}).at(8), Match(8, 2, 2, 2, 2, 2));
}

TEST_F(RestoreWorkerTest, AppliedSequenceIsCarried) {
  EXPECT_EQ(snapshot_->version(), 2u);
  EXPECT_EQ(snapshot_->applied_seq(1), 4u);
  EXPECT_EQ(snapshot_->applied_seq(2), std::nullopt);  // fed without sequence numbers
  EXPECT_EQ(snapshot_->applied_seq(4), std::nullopt);  // not in the image
  KvIndex live(keyer_);
  ASSERT_TRUE(live.RestoreWorker(*snapshot_, 1, 7).has_value());
  ASSERT_TRUE(live.RestoreWorker(*snapshot_, 2, 8).has_value());
  EXPECT_EQ(live.AppliedSeq(7), 4u);
  EXPECT_EQ(live.AppliedSeq(8), std::nullopt);
  live.RemoveWorker(7);
  EXPECT_EQ(live.AppliedSeq(7), std::nullopt);
}

// The defect this guards against: a warmed worker's subscriber replays the engine's buffer,
// which still holds the batches the snapshot was made of, and each of their blocks would
// count one copy more than the engine holds, outliving its one eviction.
TEST(RestoreWorkerReplayTest, ReplayOfBatchesInTheSnapshotCountsNoCopyTwice) {
  BlockKeyer keyer;
  // The engine's stream: two requests share blocks (1, 2), so vLLM-style copies are counted.
  const std::vector<KvEventBatch> stream = {
      Batch({Store({11, 12}, std::nullopt, {1, 2})}),
      Batch({Store({13}, 12, {3})}),
      Batch({Store({11, 12}, std::nullopt, {1, 2})}),  // a second copy of each
      Batch({Remove({11, 12})}),                       // one copy of each evicted
      // after the snapshot:
      Batch({Remove({13})}),
      Batch({Remove({11, 12})}),  // the last copies evicted
  };
  constexpr std::uint64_t kSnapshotSeq = 3;
  KvIndex sibling(keyer);
  for (std::uint64_t seq = 0; seq <= kSnapshotSeq; ++seq) sibling.ApplyBatch(1, stream[seq], seq);
  auto snapshot = IndexSnapshot::Parse(sibling.Dump(), keyer);
  ASSERT_TRUE(snapshot.has_value()) << snapshot.error();
  ASSERT_EQ(snapshot->applied_seq(1), kSnapshotSeq);

  KvIndex late(keyer);
  ASSERT_TRUE(late.RestoreWorker(*snapshot, 1, 1).has_value());
  ASSERT_EQ(late.AppliedSeq(1), kSnapshotSeq);
  // The first gap repair replays the whole buffer (what a subscriber that did not resume
  // would ask for); the batches the image holds are skipped.
  for (std::uint64_t seq = 0; seq < stream.size(); ++seq) {
    late.ApplyBatch(1, stream[seq], seq);
    if (seq > kSnapshotSeq) sibling.ApplyBatch(1, stream[seq], seq);
    if (seq == 4) {
      // Blocks (1, 2) still held once each: credited; block 3 gone.
      const auto look = ByWorker(late.Lookup(PromptKeys(keyer, {1, 2, 3})));
      EXPECT_EQ(look.at(1), Match(1, 2, 2, 2, 2, 2));
    }
  }
  EXPECT_EQ(late.counters().duplicate_batches, kSnapshotSeq + 1);
  EXPECT_EQ(late.AppliedSeq(1), stream.size() - 1);
  // Their one eviction after the snapshot leaves no credit, as on the sibling.
  EXPECT_TRUE(late.Lookup(PromptKeys(keyer, {1, 2, 3})).empty());
  EXPECT_EQ(late.counters().unknown_removals, 0u);
  EXPECT_EQ(late.Dump(), sibling.Dump());
}

TEST(RestoreWorkerReplayTest, BatchesWithoutSequenceAreAlwaysApplied) {
  BlockKeyer keyer;
  KvIndex index(keyer);
  index.ApplyBatch(1, Batch({Store({11}, std::nullopt, {1})}), 5);
  index.ApplyBatch(1, Batch({Store({11}, std::nullopt, {1})}), 5);  // a duplicate: skipped
  index.ApplyBatch(1, Batch({Remove({11})}));                      // no seq: applied
  EXPECT_EQ(index.counters().duplicate_batches, 1u);
  EXPECT_EQ(index.AppliedSeq(1), 5u);
  EXPECT_TRUE(index.Lookup(PromptKeys(keyer, {1})).empty());
  // A clear keeps the sequence; a restart (RemoveWorker) forgets it.
  index.ApplyBatch(1, Batch({AllBlocksCleared{}}), 6);
  EXPECT_EQ(index.AppliedSeq(1), 6u);
  index.RemoveWorker(1);
  EXPECT_EQ(index.AppliedSeq(1), std::nullopt);
  index.ApplyBatch(1, Batch({Store({11}, std::nullopt, {1})}), 0);  // the new engine's first
  EXPECT_EQ(ByWorker(index.Lookup(PromptKeys(keyer, {1}))).at(1), Match(1, 1, 1, 1, 1, 1));
}

TEST_F(RestoreWorkerTest, TargetThatAppliedSequencedEventsIsRefused) {
  KvIndex live(keyer_);
  // Its subscriber delivered a batch that left nothing held.
  live.ApplyBatch(7, Batch({Store({71}, std::nullopt, {8}), Remove({71})}), 0);
  const std::string before = live.Dump();
  auto r = live.RestoreWorker(*snapshot_, 1, 7);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().find("already applied events"), std::string::npos) << r.error();
  EXPECT_EQ(live.Dump(), before);
}

TEST_F(RestoreWorkerTest, StaleFlagIsCarried) {
  KvIndex live(keyer_);
  ASSERT_TRUE(live.RestoreWorker(*snapshot_, 2, 4).has_value());
  EXPECT_TRUE(Look(live, {1, 5}).at(4).stale);
}

TEST_F(RestoreWorkerTest, TargetHoldingBlocksIsRefusedAndNothingChanges) {
  KvIndex live(keyer_);
  live.ApplyBatch(7, Batch({Store({71}, std::nullopt, {8})}));
  live.ApplyBatch(5, Batch({Store({51}, std::nullopt, {1})}));
  const std::string before = live.Dump();
  auto r = live.RestoreWorker(*snapshot_, 1, 7);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().find("already holds blocks"), std::string::npos) << r.error();
  EXPECT_EQ(live.Dump(), before);
}

TEST_F(RestoreWorkerTest, TargetKnownButEmptyIsMerged) {
  KvIndex live(keyer_);
  // Worker 7 stored and removed a block (an engine map, now empty) and was marked stale.
  live.ApplyBatch(7, Batch({Store({71}, std::nullopt, {8}), Remove({71})}));
  live.MarkStale(7);
  ASSERT_TRUE(live.RestoreWorker(*snapshot_, 3, 7).has_value());
  EXPECT_EQ(Look(live, {1, 2, 7}).at(7), Match(7, 3, 3, 3, 3, 3, /*stale=*/true));
  EXPECT_EQ(live.stats().engine_hashes, 3u);
}

TEST_F(RestoreWorkerTest, AbsentWorkerAndForeignKeyerAreRefused) {
  KvIndex live(keyer_);
  EXPECT_FALSE(live.RestoreWorker(*snapshot_, 4, 4).has_value());
  BlockKeyer other(keyer_.block_size(), keyer_.seed() + 1);
  EXPECT_FALSE(IndexSnapshot::Parse(image_, other).has_value());
  KvIndex foreign(other);
  EXPECT_FALSE(foreign.RestoreWorker(*snapshot_, 1, 1).has_value());
  EXPECT_EQ(foreign.stats().workers, 0u);
}

TEST_F(RestoreWorkerTest, ABlockWithAnotherParentHereIsRefusedAndNothingChanges) {
  // An image claiming that block (1, 2)'s key is a block 0: the live index, fed by events,
  // has it under block 1.
  KvIndex source(keyer_);
  source.ApplyBatch(1, Batch({Store({11, 12}, std::nullopt, {1, 2})}));
  std::string image = source.Dump();
  const BlockKey second = PromptKeys(keyer_, {1, 2})[1];
  const std::size_t nodes_at = 8 + 4 + 4 + 8 + 8;  // after the header and the node count
  bool edited = false;
  for (std::size_t at = nodes_at; at < nodes_at + 2 * 17; at += 17) {
    BlockKey key;
    std::memcpy(&key, image.data() + at, 8);
    if (key != second) continue;
    image[at + 8] = 0;  // has_parent
    std::memset(image.data() + at + 9, 0, 8);
    edited = true;
  }
  ASSERT_TRUE(edited);
  Reseal(&image);
  auto parsed = IndexSnapshot::Parse(image, keyer_);
  ASSERT_TRUE(parsed.has_value()) << parsed.error();  // consistent in itself
  KvIndex live(keyer_);
  live.ApplyBatch(5, Batch({Store({51, 52}, std::nullopt, {1, 2})}));
  const std::string before = live.Dump();
  auto r = live.RestoreWorker(*parsed, 1, 7);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().find("another parent"), std::string::npos) << r.error();
  EXPECT_EQ(live.Dump(), before);
  // Into an index without those blocks the same image merges.
  KvIndex empty(keyer_);
  EXPECT_TRUE(empty.RestoreWorker(*parsed, 1, 7).has_value());
}

TEST_F(RestoreWorkerTest, EveryFlippedByteFailsToParse) {
  for (std::size_t i = 0; i < image_.size(); ++i) {
    std::string bad = image_;
    bad[i] ^= 0x20;
    ASSERT_FALSE(IndexSnapshot::Parse(bad, keyer_).has_value()) << "byte " << i;
  }
}

}  // namespace
}  // namespace kvroute::kv

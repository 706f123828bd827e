// StoreCore: LRU capacity in bytes, idle TTL, events with medium "SHARED", refresh on a repeat
// offer or a match, leases (pinned against eviction and expiry, refused puts when all is
// leased, lease TTL); InProcessSharedStore's restart; the wire codec round trip.
#include <gtest/gtest.h>

#include <chrono>

#include "store/in_process_store.h"
#include "store/store_core.h"
#include "store/store_wire.h"

namespace kvroute::store {
namespace {

using std::chrono::seconds;

StoredBlock Block(kv::EngineHash hash, std::optional<kv::EngineHash> parent = std::nullopt) {
  StoredBlock b;
  b.meta.key = hash;
  b.meta.hash = hash;
  b.meta.parent_hash = parent;
  std::vector<TokenId> tokens(4, static_cast<TokenId>(hash));
  b.meta.payload = std::make_shared<const engine::BlockPayload>(
      engine::BlockPayload{.tokens = tokens, .lora_name = ""});
  b.size_bytes = 100;
  return b;
}

std::vector<kv::EngineHash> Removed(const std::vector<kv::KvEvent>& events) {
  std::vector<kv::EngineHash> out;
  for (const auto& e : events) {
    if (const auto* r = std::get_if<kv::BlockRemoved>(&e)) {
      EXPECT_EQ(r->medium, "SHARED");
      out.insert(out.end(), r->block_hashes.begin(), r->block_hashes.end());
    }
  }
  return out;
}

std::vector<kv::EngineHash> Stored(const std::vector<kv::KvEvent>& events) {
  std::vector<kv::EngineHash> out;
  for (const auto& e : events) {
    if (const auto* s = std::get_if<kv::BlockStored>(&e)) {
      EXPECT_EQ(s->medium, "SHARED");
      out.insert(out.end(), s->block_hashes.begin(), s->block_hashes.end());
    }
  }
  return out;
}

TEST(StoreCoreTest, StoresEachBlockOnceWithItsParentAndTokens) {
  StoreCore core({.capacity_bytes = 1000, .block_size = 4});
  std::vector<kv::KvEvent> ev;
  const std::vector<StoredBlock> chain = {Block(1), Block(2, 1)};
  core.Put(chain, Nanos(0), &ev);
  core.Put(chain, Nanos(1), &ev);  // offered again: refreshed, no event
  ASSERT_EQ(ev.size(), 2u);
  const auto& second = std::get<kv::BlockStored>(ev[1]);
  EXPECT_EQ(second.parent_block_hash, std::optional<kv::EngineHash>(1));
  EXPECT_EQ(second.token_ids, std::vector<TokenId>(4, 2));
  EXPECT_EQ(second.block_size, 4u);
  EXPECT_EQ(core.counters().stored, 2u);
  EXPECT_EQ(core.counters().refreshed, 2u);
  EXPECT_DOUBLE_EQ(core.used_bytes(), 200);
}

TEST(StoreCoreTest, EvictsTheLeastRecentlyUsedBlocksForRoomAndAnnouncesIt) {
  StoreCore core({.capacity_bytes = 300, .block_size = 4});
  std::vector<kv::KvEvent> ev;
  const std::vector<StoredBlock> three = {Block(1), Block(2), Block(3)};
  core.Put(three, Nanos(0), &ev);
  const std::vector<kv::EngineHash> one = {1};
  EXPECT_EQ(core.Match(one, Nanos(1), &ev), 1u);  // 1 is now the most recent: 2 is the LRU
  ev.clear();
  const std::vector<StoredBlock> more = {Block(4), Block(5)};
  core.Put(more, Nanos(2), &ev);
  EXPECT_EQ(Removed(ev), (std::vector<kv::EngineHash>{2, 3}));
  EXPECT_EQ(Stored(ev), (std::vector<kv::EngineHash>{4, 5}));
  EXPECT_EQ(core.Hashes(), (std::vector<kv::EngineHash>{1, 4, 5}));
  EXPECT_EQ(core.counters().evicted, 2u);
  EXPECT_LE(core.used_bytes(), 300);
}

TEST(StoreCoreTest, ABlockLargerThanTheStoreIsRejectedWithoutEvictingAnything) {
  StoreCore core({.capacity_bytes = 150, .block_size = 4});
  std::vector<kv::KvEvent> ev;
  core.Put(std::vector<StoredBlock>{Block(1)}, Nanos(0), &ev);
  StoredBlock big = Block(2);
  big.size_bytes = 151;
  core.Put(std::vector<StoredBlock>{big}, Nanos(0), &ev);
  EXPECT_TRUE(core.Contains(1));
  EXPECT_FALSE(core.Contains(2));
  EXPECT_EQ(core.counters().rejected, 1u);
}

TEST(StoreCoreTest, MatchCountsConsecutiveBlocksFromTheFirst) {
  StoreCore core({.capacity_bytes = 1000, .block_size = 4});
  std::vector<kv::KvEvent> ev;
  core.Put(std::vector<StoredBlock>{Block(1), Block(2), Block(4)}, Nanos(0), &ev);
  EXPECT_EQ(core.Match(std::vector<kv::EngineHash>{1, 2, 3, 4}, Nanos(0), &ev), 2u);
  EXPECT_EQ(core.Match(std::vector<kv::EngineHash>{3, 4}, Nanos(0), &ev), 0u);
  EXPECT_EQ(core.counters().hit_blocks, 2u);
  EXPECT_EQ(core.counters().queried_blocks, 6u);
}

TEST(StoreCoreTest, IdleBlocksExpireAfterTheTtlAndAMatchKeepsABlockAlive) {
  StoreCore core({.capacity_bytes = 1000, .ttl = seconds(10), .block_size = 4});
  std::vector<kv::KvEvent> ev;
  core.Put(std::vector<StoredBlock>{Block(1), Block(2)}, Nanos(0), &ev);
  EXPECT_EQ(core.Match(std::vector<kv::EngineHash>{2}, seconds(6), &ev), 1u);
  ev.clear();
  core.Expire(seconds(10), &ev);  // 1 idle for 10 s: gone; 2 used at 6 s: stays
  EXPECT_EQ(Removed(ev), std::vector<kv::EngineHash>{1});
  EXPECT_EQ(core.counters().expired, 1u);
  // A match past the TTL never reports an expired block.
  ev.clear();
  EXPECT_EQ(core.Match(std::vector<kv::EngineHash>{2}, seconds(17), &ev), 0u);
  EXPECT_EQ(Removed(ev), std::vector<kv::EngineHash>{2});
  EXPECT_EQ(core.size(), 0u);
  EXPECT_DOUBLE_EQ(core.used_bytes(), 0);
}

TEST(StoreCoreTest, ZeroTtlNeverExpires) {
  StoreCore core({.capacity_bytes = 1000, .block_size = 4});
  std::vector<kv::KvEvent> ev;
  core.Put(std::vector<StoredBlock>{Block(1)}, Nanos(0), &ev);
  core.Expire(seconds(1'000'000), &ev);
  EXPECT_TRUE(core.Contains(1));
}

TEST(StoreCoreLeaseTest, ALeasedBlockIsNeitherEvictedNorExpiredAndRejoinsTheLruWhenReleased) {
  StoreCore core({.capacity_bytes = 300, .ttl = seconds(10), .block_size = 4,
                  .lease_ttl = seconds(60)});
  std::vector<kv::KvEvent> ev;
  core.Put(std::vector<StoredBlock>{Block(1), Block(2, 1), Block(3)}, Nanos(0), &ev);
  // Every hash the store holds, past a gap too: 1 and 2 (4 is not held; 9 neither).
  const LeaseGrant grant = core.Lease(std::vector<kv::EngineHash>{9, 1, 4, 2}, Nanos(0), &ev);
  ASSERT_NE(grant.id, 0u);
  EXPECT_EQ(grant.blocks, 2u);
  EXPECT_EQ(core.leased_size(), 2u);
  EXPECT_EQ(core.live_leases(), 1u);
  ev.clear();
  // Full: the room for 5 comes from 3, the one unleased block, though 1 is older.
  core.Put(std::vector<StoredBlock>{Block(5)}, seconds(1), &ev);
  EXPECT_EQ(Removed(ev), std::vector<kv::EngineHash>{3});
  EXPECT_EQ(Stored(ev), std::vector<kv::EngineHash>{5});
  EXPECT_TRUE(core.Contains(1));
  EXPECT_TRUE(core.Contains(2));
  // Past the idle TTL: 5 (unleased, last used at 1 s) expires, the leased blocks do not.
  ev.clear();
  core.Expire(seconds(30), &ev);
  EXPECT_EQ(Removed(ev), std::vector<kv::EngineHash>{5});
  EXPECT_EQ(core.Hashes(), (std::vector<kv::EngineHash>{1, 2}));
  // Released: the blocks count as used now and take the idle TTL from here.
  EXPECT_TRUE(core.Release(grant.id, seconds(30)));
  EXPECT_FALSE(core.Release(grant.id, seconds(30)));  // already ended
  EXPECT_EQ(core.leased_size(), 0u);
  EXPECT_EQ(core.counters().leases_released, 1u);
  ev.clear();
  core.Expire(seconds(39), &ev);
  EXPECT_TRUE(Removed(ev).empty());
  core.Expire(seconds(40), &ev);
  EXPECT_EQ(Removed(ev), (std::vector<kv::EngineHash>{1, 2}));
}

TEST(StoreCoreLeaseTest, TwoLeasesOnABlockKeepItUntilBothEnd) {
  StoreCore core({.capacity_bytes = 300, .block_size = 4});
  std::vector<kv::KvEvent> ev;
  core.Put(std::vector<StoredBlock>{Block(1), Block(2)}, Nanos(0), &ev);
  const LeaseGrant a = core.Lease(std::vector<kv::EngineHash>{1}, Nanos(1), &ev);
  const LeaseGrant b = core.Lease(std::vector<kv::EngineHash>{1}, Nanos(2), &ev);
  ASSERT_NE(a.id, b.id);
  core.Release(a.id, Nanos(3));
  ev.clear();
  core.Put(std::vector<StoredBlock>{Block(3), Block(4)}, Nanos(4), &ev);
  EXPECT_EQ(Removed(ev), std::vector<kv::EngineHash>{2});  // 1 is still under b
  EXPECT_TRUE(core.Contains(1));
  core.Release(b.id, Nanos(5));
  ev.clear();
  core.Put(std::vector<StoredBlock>{Block(5)}, Nanos(6), &ev);
  EXPECT_EQ(Removed(ev), std::vector<kv::EngineHash>{3});  // LRU: 3 (4 ns), 4, then 1 (5 ns)
  EXPECT_EQ(core.Hashes(), (std::vector<kv::EngineHash>{4, 1, 5}));
}

TEST(StoreCoreLeaseTest, ALeaseNeverReleasedEndsByItselfAfterTheLeaseTtl) {
  StoreCore core({.capacity_bytes = 100, .block_size = 4, .lease_ttl = seconds(5)});
  std::vector<kv::KvEvent> ev;
  core.Put(std::vector<StoredBlock>{Block(1)}, Nanos(0), &ev);
  const LeaseGrant grant = core.Lease(std::vector<kv::EngineHash>{1}, Nanos(0), &ev);
  ev.clear();
  core.Put(std::vector<StoredBlock>{Block(2)}, seconds(4), &ev);  // still leased: refused
  EXPECT_FALSE(core.Contains(2));
  EXPECT_EQ(core.counters().refused_full, 1u);
  core.Put(std::vector<StoredBlock>{Block(2)}, seconds(5), &ev);  // lease over: 1 evicted
  EXPECT_EQ(Removed(ev), std::vector<kv::EngineHash>{1});
  EXPECT_TRUE(core.Contains(2));
  EXPECT_EQ(core.counters().leases_expired, 1u);
  EXPECT_EQ(core.live_leases(), 0u);
  EXPECT_FALSE(core.Release(grant.id, seconds(6)));  // a release after expiry is a no-op
}

TEST(StoreCoreLeaseTest, NothingHeldIsNoLease) {
  StoreCore core({.capacity_bytes = 100, .block_size = 4});
  std::vector<kv::KvEvent> ev;
  core.Put(std::vector<StoredBlock>{Block(2)}, Nanos(0), &ev);
  EXPECT_EQ(core.Lease(std::vector<kv::EngineHash>{1, 3}, Nanos(0), &ev).id, 0u);
  EXPECT_EQ(core.Lease(std::vector<kv::EngineHash>{}, Nanos(0), &ev).id, 0u);
  EXPECT_EQ(core.counters().leases, 0u);
  EXPECT_EQ(core.leased_size(), 0u);
}

TEST(InProcessSharedStoreTest, LeaseIdsAfterARestartNeverNameALeaseFromBefore) {
  InProcessSharedStore store({.capacity_bytes = 1000, .block_size = 4}, 100);
  store.Put(std::vector<engine::BlockMeta>{Block(1).meta}, Nanos(0));
  const std::uint64_t before = store.Lease(std::vector<kv::EngineHash>{1}, Nanos(0));
  ASSERT_NE(before, 0u);
  store.Restart();
  store.Put(std::vector<engine::BlockMeta>{Block(1).meta}, Nanos(1));
  const std::uint64_t after = store.Lease(std::vector<kv::EngineHash>{1}, Nanos(1));
  ASSERT_NE(after, 0u);
  EXPECT_NE(after, before);
  store.Release(before, Nanos(2));  // the old life's id: ignored, the new lease holds
  EXPECT_EQ(store.core().live_leases(), 1u);
  store.Release(after, Nanos(2));
  EXPECT_EQ(store.core().live_leases(), 0u);
}

TEST(InProcessSharedStoreTest, RestartForgetsEverythingAndQueuesAllBlocksCleared) {
  InProcessSharedStore store({.capacity_bytes = 1000, .block_size = 4}, 100);
  std::vector<engine::BlockMeta> metas = {Block(1).meta, Block(2, 1).meta};
  store.Put(metas, Nanos(0));
  EXPECT_EQ(Stored(store.TakeEvents()).size(), 2u);
  store.Restart();
  const auto events = store.TakeEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<kv::AllBlocksCleared>(events[0]));
  EXPECT_EQ(store.Match(std::vector<kv::EngineHash>{1, 2}, Nanos(1)), 0u);
}

TEST(StoreWireTest, PutAndMatchRoundTripFullWidthHashes) {
  const kv::EngineHash big = 0xfedcba9876543210ULL;
  std::vector<engine::BlockMeta> metas = {Block(big).meta, Block(7, big).meta};
  auto put = DecodePut(EncodePut(metas, 4, 123.5));
  ASSERT_TRUE(put.has_value()) << put.error();
  ASSERT_EQ(put->blocks.size(), 2u);
  EXPECT_EQ(put->block_size, 4u);
  EXPECT_EQ(put->blocks[0].meta.hash, big);
  EXPECT_FALSE(put->blocks[0].meta.parent_hash.has_value());
  EXPECT_EQ(put->blocks[1].meta.parent_hash, std::optional<kv::EngineHash>(big));
  EXPECT_EQ(put->blocks[1].meta.payload->tokens, std::vector<TokenId>(4, 7));
  EXPECT_DOUBLE_EQ(put->blocks[1].size_bytes, 123.5);
  auto match = DecodeMatch(EncodeMatch(std::vector<kv::EngineHash>{big, 1}));
  ASSERT_TRUE(match.has_value());
  EXPECT_EQ(*match, (std::vector<kv::EngineHash>{big, 1}));
}

TEST(StoreWireTest, LeaseAndReleaseRoundTripFullWidthIds) {
  const std::uint64_t id = 0xfedcba9876543210ULL;
  auto reply = DecodeLeaseReply(EncodeLeaseReply({.id = id, .blocks = 7}));
  ASSERT_TRUE(reply.has_value()) << reply.error();
  EXPECT_EQ(reply->lease, id);
  EXPECT_EQ(reply->leased, 7u);
  auto release = DecodeRelease(EncodeRelease(id));
  ASSERT_TRUE(release.has_value()) << release.error();
  EXPECT_EQ(*release, id);
  EXPECT_FALSE(DecodeRelease(R"({"lease":0})").has_value());
  EXPECT_FALSE(DecodeRelease(R"({"lease":-3})").has_value());
  EXPECT_FALSE(DecodeRelease(R"({"id":3})").has_value());
  EXPECT_FALSE(DecodeLeaseReply(R"({"lease":1})").has_value());
}

TEST(StoreWireTest, MalformedBodiesAreErrors) {
  EXPECT_FALSE(DecodeMatch("[]").has_value());
  EXPECT_FALSE(DecodeMatch(R"({"hashes":[-1]})").has_value());
  EXPECT_FALSE(DecodePut(R"({"block_size":4,"blocks":[{"hash":1,"tokens":[1],"size_bytes":1}]})")
                   .has_value());  // 1 token, block_size 4
  EXPECT_FALSE(DecodePut(R"({"blocks":[]})").has_value());
}

}  // namespace
}  // namespace kvroute::store

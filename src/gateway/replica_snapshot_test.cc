// A sibling's snapshot: the envelope round trip (merging by name: replica_warm_test.cc).
#include "gateway/replica_snapshot.h"

#include <gtest/gtest.h>

#include "kv/index/index.h"
#include "kv/index/index_test_util.h"

namespace kvroute::gateway {
namespace {

using kv::testing::Batch;
using kv::testing::Store;

// Worker 0 holds blocks {1, 2}; worker 1 holds {3}.
std::string SiblingImage() {
  kv::KvIndex index{kv::BlockKeyer(kv::kDefaultBlockSize)};
  index.ApplyBatch(0, Batch({Store({101, 102}, std::nullopt, {1, 2})}));
  index.ApplyBatch(1, Batch({Store({103}, std::nullopt, {3})}));
  return index.Dump();
}

TEST(ReplicaSnapshotTest, TheEnvelopeCarriesTheWorkerTableAndTheImage) {
  const std::string image = SiblingImage();
  auto decoded = DecodeSiblingSnapshot(EncodeSiblingSnapshot({{0, "w0"}, {1, "w1"}}, image));
  ASSERT_TRUE(decoded.has_value()) << decoded.error();
  ASSERT_EQ(decoded->workers.size(), 2u);
  EXPECT_EQ(decoded->workers[1].id, 1u);
  EXPECT_EQ(decoded->workers[1].name, "w1");
  EXPECT_EQ(decoded->image, image);
}

TEST(ReplicaSnapshotTest, ATruncatedOrForeignBodyIsAnError) {
  const std::string body = EncodeSiblingSnapshot({{0, "w0"}}, SiblingImage());
  EXPECT_FALSE(DecodeSiblingSnapshot(body.substr(0, body.size() - 1)).has_value());
  EXPECT_FALSE(DecodeSiblingSnapshot("{\"format\":\"other\"}\nxx").has_value());
  EXPECT_FALSE(DecodeSiblingSnapshot("no header line").has_value());
}

}  // namespace
}  // namespace kvroute::gateway

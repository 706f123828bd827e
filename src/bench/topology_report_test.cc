#include "bench/topology_report.h"

#include <gtest/gtest.h>

namespace kvroute::bench {
namespace {

// Two decode sims' NIXL histograms, as kvroute sim (and vLLM) expose them.
constexpr const char* kDecodeA = R"(# TYPE vllm:nixl_xfer_time_seconds histogram
vllm:nixl_xfer_time_seconds_bucket{engine="0",model_name="m",le="0.01"} 2
vllm:nixl_xfer_time_seconds_bucket{engine="0",model_name="m",le="0.1"} 4
vllm:nixl_xfer_time_seconds_bucket{engine="0",model_name="m",le="+Inf"} 4
vllm:nixl_xfer_time_seconds_sum{engine="0",model_name="m"} 0.2
vllm:nixl_xfer_time_seconds_count{engine="0",model_name="m"} 4
vllm:nixl_bytes_transferred_sum{engine="0",model_name="m"} 4000000
vllm:nixl_bytes_transferred_count{engine="0",model_name="m"} 4
)";
constexpr const char* kDecodeB = R"(vllm:nixl_xfer_time_seconds_bucket{le="0.01"} 0
vllm:nixl_xfer_time_seconds_bucket{le="0.1"} 4
vllm:nixl_xfer_time_seconds_bucket{le="+Inf"} 4
vllm:nixl_xfer_time_seconds_sum 0.3
vllm:nixl_xfer_time_seconds_count 4
vllm:nixl_bytes_transferred_sum 1000000
)";

TEST(TopologyReport, TransfersSumOverDecodeSims) {
  TransferStats s;
  TransferBuckets b;
  EXPECT_TRUE(AccumulateTransfers(kDecodeA, &s));
  EXPECT_TRUE(AccumulateTransfers(kDecodeB, &s));
  AccumulateTransferBuckets(kDecodeA, &b);
  AccumulateTransferBuckets(kDecodeB, &b);
  EXPECT_DOUBLE_EQ(s.transfers, 8);
  EXPECT_DOUBLE_EQ(s.bytes, 5e6);
  EXPECT_DOUBLE_EQ(s.time_sum_s, 0.5);
  ASSERT_EQ(b.time.size(), 3u);
  EXPECT_DOUBLE_EQ(b.time[0].second, 2);  // le 0.01
  EXPECT_DOUBLE_EQ(b.time[1].second, 8);  // le 0.1
  // Median: rank 4 of 8 lies in (0.01, 0.1], 2 of its 6 → 0.01 + 0.09 * 2/6.
  EXPECT_NEAR(*BucketQuantile(b.time, 0.5), 0.01 + 0.09 * 2.0 / 6.0, 1e-12);
  EXPECT_NEAR(*BucketQuantile(b.time, 0.99), 0.01 + 0.09 * (7.92 - 2) / 6.0, 1e-12);
}

TEST(TopologyReport, NoNixlHistogramMeansNoTransferFigure) {
  TransferStats s;
  TransferBuckets b;
  EXPECT_FALSE(AccumulateTransfers("vllm:num_requests_running 3\n", &s));
  EXPECT_FALSE(AccumulateTransferBuckets("", &b));
  EXPECT_FALSE(BucketQuantile(b.time, 0.5).has_value());
}

TopologyRow Row(std::string topology, std::string router, int gpus, std::optional<double> g30,
                std::optional<double> g50) {
  TopologyRow r;
  r.topology = std::move(topology);
  r.router = std::move(router);
  r.gpus = gpus;
  r.row.targets_tps = {30, 50};
  r.row.goodput = {g30, g50};
  return r;
}

TEST(TopologyReport, RatiosAreAgainstTheFirstTopologyOfTheSameRouter) {
  std::vector<TopologyRow> rows = {Row("agg", "kvroute:a", 8, 100, 40),
                                   Row("agg", "kvroute:b", 8, 50, std::nullopt),
                                   Row("pd", "kvroute:a", 12, 250, 130),
                                   Row("pd", "kvroute:b", 12, 150, 10)};
  rows[2].transfer = TransferStats{.transfers = 2, .bytes = 1, .time_sum_s = 0.5};
  rows[2].row.ttft.mean = 1.0;
  rows[2].row.ttft.count = 10;
  FillTopologyRatios(rows);
  EXPECT_DOUBLE_EQ(*rows[0].goodput_ratio[0], 1.0);
  EXPECT_DOUBLE_EQ(*rows[2].goodput_ratio[0], 2.5);
  EXPECT_DOUBLE_EQ(*rows[2].goodput_ratio[1], 130.0 / 40.0);
  EXPECT_DOUBLE_EQ(*rows[3].goodput_ratio[0], 3.0);
  EXPECT_FALSE(rows[3].goodput_ratio[1].has_value());  // the baseline has none: no ratio
  EXPECT_DOUBLE_EQ(*rows[2].transfer_share_of_ttft, 0.05);
  EXPECT_FALSE(rows[0].transfer_share_of_ttft.has_value());
  const std::string json = TopologyJson(rows, 10);
  EXPECT_NE(json.find("\"ratio_vs_first_topology\":2.5"), std::string::npos) << json;
  EXPECT_NE(TopologyTable(rows, 10).find("pd / kvroute:a"), std::string::npos);
}

}  // namespace
}  // namespace kvroute::bench

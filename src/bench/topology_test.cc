#include "bench/topology.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace kvroute::bench {
namespace {

bool HasFlag(const SimLaunch& s, const std::string& flag, const std::string& value) {
  for (std::size_t i = 0; i + 1 < s.extra_argv.size(); ++i) {
    if (s.extra_argv[i] == flag && s.extra_argv[i + 1] == value) return true;
  }
  return false;
}

bool HasFlag(const SimLaunch& s, const std::string& flag) {
  return std::find(s.extra_argv.begin(), s.extra_argv.end(), flag) != s.extra_argv.end();
}

TEST(Topology, InferaPresetIsTheAggregatedTp8AndTheTwelveGpuPdFleet) {
  auto t = LoadTopologies({"infera"});
  ASSERT_TRUE(t) << t.error();
  ASSERT_EQ(t->size(), 2u);
  const Topology& agg = (*t)[0];
  const Topology& pd = (*t)[1];
  EXPECT_EQ(agg.name, "infera-aggregated");
  EXPECT_FALSE(agg.pd);
  EXPECT_EQ(agg.gpus, 8);
  ASSERT_EQ(agg.sims.size(), 1u);
  EXPECT_EQ(agg.sims[0].profile, "kimi-k2.6-mi355x-tp8");
  EXPECT_TRUE(HasFlag(agg.sims[0], "--max-num-batched-tokens", "8192"));
  EXPECT_FALSE(HasFlag(agg.sims[0], "--kv-transfer-config"));  // no connector without P/D
  EXPECT_TRUE(agg.sims[0].role.empty());

  EXPECT_EQ(pd.name, "infera-pd");
  EXPECT_TRUE(pd.pd);
  EXPECT_EQ(pd.gpus, 12);  // 1 x TP4 + 4 x TP2
  ASSERT_EQ(pd.sims.size(), 5u);
  EXPECT_EQ(pd.sims[0].role, "prefill");
  EXPECT_EQ(pd.sims[0].tp, 4u);
  EXPECT_TRUE(HasFlag(pd.sims[0], "--kv-transfer-config",
                      R"({"kv_connector":"NixlConnector","kv_role":"kv_producer"})"));
  EXPECT_TRUE(HasFlag(pd.sims[0], "--max-num-batched-tokens", "4096"));
  for (std::size_t i = 1; i < 5; ++i) {
    EXPECT_EQ(pd.sims[i].role, "decode");
    EXPECT_EQ(pd.sims[i].tp, 2u);
    EXPECT_EQ(pd.sims[i].gpus, 2u);
    EXPECT_EQ(pd.sims[i].link, "rdma-400g");
    EXPECT_TRUE(HasFlag(pd.sims[i], "--kv-link", "rdma-400g"));
    EXPECT_TRUE(HasFlag(pd.sims[i], "--kv-transfer-config",
                        R"({"kv_connector":"NixlConnector","kv_role":"kv_consumer"})"));
  }
}

// The preset is the simulate script's two fleet files, byte for byte: the live and simulated
// experiment run the same fleets.
TEST(Topology, InferaPresetMatchesTheScriptsFleetFiles) {
  // The source tree by its absolute path: __FILE__ is relative to the build directory, and
  // ctest runs each test from its own.
  const auto dir = std::filesystem::path(KVROUTE_SOURCE_DIR) / "scripts/pd";
  for (const auto& [name, text] : TopologyPreset("infera")) {
    std::ifstream in(dir / (name + ".yaml"));
    ASSERT_TRUE(in) << (dir / (name + ".yaml"));
    std::stringstream file;
    file << in.rdbuf();
    EXPECT_EQ(file.str(), text) << name;
  }
}

TEST(Topology, GpusBeyondTpCountTowardsPerGpuNormalisation) {
  auto t = ParseTopology("wide", R"(fleet:
  - {count: 2, profile: qwen3-32b-tp2-h100, tp: 2, gpus: 3, engine: {max_num_seqs: 8}}
)");
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->gpus, 6);
  EXPECT_FALSE(t->pd);
  EXPECT_TRUE(HasFlag(t->sims[1], "--max-num-seqs", "8"));
}

TEST(Topology, MixedWorkerOfAPdFleetSpeaksBothRoles) {
  auto t = ParseTopology("mix", R"(fleet:
  - {count: 1, profile: qwen3-32b-tp2-h100, role: prefill}
  - {count: 1, profile: qwen3-32b-tp2-h100, role: mixed}
)");
  ASSERT_TRUE(t) << t.error();
  EXPECT_TRUE(t->pd);
  EXPECT_EQ(t->sims[1].role, "mixed");
  EXPECT_TRUE(HasFlag(t->sims[1], "--kv-transfer-config",
                      R"({"kv_connector":"NixlConnector","kv_role":"kv_both"})"));
}

TEST(Topology, RefusesSimulateOnlyChangesAndUnknownFiles) {
  auto changes = ParseTopology("c", R"(fleet:
  - {count: 2, profile: qwen3-32b-tp2-h100}
changes: [{t: 10s, fail: 1}]
)");
  ASSERT_FALSE(changes);
  EXPECT_NE(changes.error().find("simulate-only"), std::string::npos);
  auto missing = LoadTopologies({"/nonexistent/fleet.yaml"});
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().find("cannot read"), std::string::npos);
  auto twice = LoadTopologies({"infera", "infera"});
  ASSERT_FALSE(twice);
  EXPECT_NE(twice.error().find("two named"), std::string::npos);
}

TEST(Topology, NginxCannotRouteAPdFleet) {
  auto t = LoadTopologies({"infera"});
  ASSERT_TRUE(t) << t.error();
  EXPECT_TRUE(RouterFitsTopology("nginx-rr", (*t)[0]));
  EXPECT_FALSE(RouterFitsTopology("nginx-rr", (*t)[1]));
  EXPECT_TRUE(RouterFitsTopology("kvroute:predicted_latency", (*t)[1]));
}

TEST(Topology, ServeYamlCarriesRolesLinksAndThePdRule) {
  SimInfo p{.url = "http://127.0.0.1:1", .model = "m", .role = "prefill", .tp = 4, .gpus = 4};
  SimInfo d{.url = "http://127.0.0.1:2", .model = "m", .role = "decode", .tp = 2, .gpus = 2,
            .link = "rdma-400g"};
  ServeConfigOptions o{.policy = "predicted_latency", .pd_rule = "cost"};
  const std::string y = ServeYaml({p, d}, o);
  EXPECT_NE(y.find("role: prefill\n    tp: 4\n    gpus: 4\n"), std::string::npos) << y;
  EXPECT_NE(y.find("role: decode\n    tp: 2\n    gpus: 2\n    link: \"rdma-400g\"\n"),
            std::string::npos)
      << y;
  EXPECT_NE(y.find("pd: {rule: cost}\n"), std::string::npos) << y;
  o.pd_rule = "dynamo_token_cap";
  o.pd_token_cap = 0;
  EXPECT_NE(ServeYaml({p, d}, o).find("pd: {rule: dynamo_token_cap, token_cap: 0}\n"),
            std::string::npos);
  o.pd_rule = "llmd_non_cached";
  o.pd_token_cap = -1;
  o.pd_non_cached_tokens = 512;
  EXPECT_NE(ServeYaml({p, d}, o).find("pd: {rule: llmd_non_cached, non_cached_tokens: 512}\n"),
            std::string::npos);
  // Without roles no pd: section: a homogeneous cluster's configuration is unchanged.
  EXPECT_EQ(ServeYaml({SimInfo{.url = "http://127.0.0.1:3", .model = "m"}}, o).find("pd:"),
            std::string::npos);
}

}  // namespace
}  // namespace kvroute::bench

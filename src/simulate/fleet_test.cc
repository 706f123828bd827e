#include "simulate/fleet.h"

#include <gtest/gtest.h>

namespace kvroute::simulate {
namespace {

WorkerSpec Base() {
  WorkerSpec s;
  auto p = engine::LoadProfile(engine::kDefaultProfileName);
  EXPECT_TRUE(p.has_value());
  s.profile = *p;
  return s;
}

TEST(FleetTest, FailFlagNamesTimeAndWorker) {
  auto c = ParseChangeFlag(FleetChange::Kind::kFail, "t=120s,worker=3", Base());
  ASSERT_TRUE(c.has_value()) << c.error();
  EXPECT_EQ(c->at, std::chrono::seconds(120));
  EXPECT_EQ(c->worker, 3u);
}

TEST(FleetTest, AddFlagTakesCountAndProfile) {
  auto c =
      ParseChangeFlag(FleetChange::Kind::kAdd, "t=300s,count=8,profile=llama-3.1-8b-h100", Base());
  ASSERT_TRUE(c.has_value()) << c.error();
  EXPECT_EQ(c->count, 8);
  EXPECT_EQ(c->spec.profile.name, "llama-3.1-8b-h100");
}

TEST(FleetTest, BadFlagsSayWhatIsWrong) {
  auto missing = ParseChangeFlag(FleetChange::Kind::kFail, "t=1s", Base());
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.error().find("worker"), std::string::npos);
  auto unknown = ParseChangeFlag(FleetChange::Kind::kRestart, "t=1s,worker=1,x=2", Base());
  ASSERT_FALSE(unknown.has_value());
  EXPECT_NE(unknown.error().find("'x'"), std::string::npos);
}

// P/D fleets (issue 19): role, link, tp and gpus per entry; the engine's TP is its profile's.
TEST(FleetTest, YamlCarriesRolesLinksTpAndGpus) {
  auto f = ParseFleetYaml(R"(
fleet:
  - {count: 1, profile: kimi-k2.6-mi355x-tp4, role: prefill, tp: 4, gpus: 8, link: roce-100g}
  - {count: 2, profile: kimi-k2.6-mi355x-tp2, role: decode}
)",
                          Base());
  ASSERT_TRUE(f.has_value()) << f.error();
  ASSERT_EQ(f->workers.size(), 3u);
  EXPECT_EQ(f->workers[0].role, sched::Role::kPrefill);
  EXPECT_EQ(f->workers[0].gpus, 8u);
  EXPECT_EQ(f->workers[0].config.kv_link.name, "roce-100g");
  EXPECT_EQ(f->workers[1].role, sched::Role::kDecode);
  EXPECT_EQ(f->workers[1].gpus, 0u);              // the profile's
  EXPECT_EQ(f->workers[1].config.kv_link.name, "");  // the profile's first link
  auto base = ParseFleetYaml("fleet: [{count: 1}]", Base());
  ASSERT_TRUE(base.has_value());
  EXPECT_EQ(base->workers[0].role, sched::Role::kMixed);
}

TEST(FleetTest, YamlPdKeysAreValidated) {
  for (const char* bad : {"fleet: [{role: router}]", "fleet: [{tp: 3}]", "fleet: [{gpus: 1}]",
                          "fleet: [{link: carrier-pigeon}]"}) {
    auto f = ParseFleetYaml(bad, Base());  // the base profile is TP2
    EXPECT_FALSE(f.has_value()) << bad;
    if (!f) {
      EXPECT_NE(f.error().find("fleet[0]."), std::string::npos) << f.error();
    }
  }
}

TEST(FleetTest, YamlBuildsHeterogeneousFleetAndSchedule) {
  auto f = ParseFleetYaml(R"(
fleet:
  - count: 2
    profile: llama-3.1-8b-h100
    engine: {max_num_seqs: 64, num_gpu_blocks: 1000}
  - count: 1
changes:
  - {t: 200s, restart: 0}
  - {t: 100s, fail: 2}
  - {t: 300s, add: 4}
)",
                          Base());
  ASSERT_TRUE(f.has_value()) << f.error();
  ASSERT_EQ(f->workers.size(), 3u);
  EXPECT_EQ(f->workers[0].profile.name, "llama-3.1-8b-h100");
  EXPECT_EQ(f->workers[0].config.max_num_seqs, 64u);
  EXPECT_EQ(f->workers[0].config.num_gpu_blocks_override, 1000);
  EXPECT_EQ(f->workers[2].profile.name, engine::kDefaultProfileName);
  ASSERT_EQ(f->changes.size(), 3u);
  EXPECT_EQ(f->changes[0].kind, FleetChange::Kind::kFail);  // sorted by time
  EXPECT_EQ(f->changes[2].count, 4);
  EXPECT_TRUE(ValidateFleet(*f).has_value());
}

TEST(FleetTest, YamlUnknownKeyNamesItsPath) {
  auto f = ParseFleetYaml("fleet:\n  - count: 1\n    engine: {max_seqs: 3}\n", Base());
  ASSERT_FALSE(f.has_value());
  EXPECT_NE(f.error().find("fleet[0].engine.max_seqs"), std::string::npos);
}

TEST(FleetTest, ValidateRejectsMixedBlockSizesAndUnknownWorkers) {
  Fleet f;
  f.workers = {Base(), Base()};
  f.workers[1].config.block_size = 32;
  EXPECT_FALSE(ValidateFleet(f).has_value());
  f.workers[1].config.block_size = 16;
  f.changes.push_back(FleetChange{FleetChange::Kind::kFail, Nanos(1), 5, 0, {}});
  EXPECT_FALSE(ValidateFleet(f).has_value());
}

}  // namespace
}  // namespace kvroute::simulate

#include "bench/cluster.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace kvroute::bench {
namespace {

std::string TempLog(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("kvroute_cluster_test_" + std::to_string(getpid()) + "_" + name))
      .string();
}

TEST(SimReadyLineTest, ParsesUrlModelAndKvEndpoint) {
  auto info = ParseSimReadyLine(
      "kvroute sim listening on http://127.0.0.1:4321 model=sim-model "
      "kv_events=tcp://127.0.0.1:5557 kv_replay=tcp://127.0.0.1:5558");
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->url, "http://127.0.0.1:4321");
  EXPECT_EQ(info->model, "sim-model");
  EXPECT_EQ(info->kv_endpoint, "tcp://127.0.0.1:5557");
}

TEST(SimReadyLineTest, KvEventsOffLeavesEndpointEmpty) {
  auto info =
      ParseSimReadyLine("kvroute sim listening on http://127.0.0.1:1 model=m kv_events=off");
  ASSERT_TRUE(info.has_value());
  EXPECT_TRUE(info->kv_endpoint.empty());
}

TEST(SimReadyLineTest, RejectsOtherLines) {
  EXPECT_FALSE(ParseSimReadyLine("something else").has_value());
}

TEST(ServeReadyLineTest, ParsesUrl) {
  auto url = ParseServeReadyLine(
      "kvroute serve listening on http://127.0.0.1:8080 workers=2 policy=x block_size=16");
  ASSERT_TRUE(url.has_value());
  EXPECT_EQ(*url, "http://127.0.0.1:8080");
}

TEST(RouterNameTest, KnowsNginxAndKvroutePresets) {
  EXPECT_TRUE(IsKnownRouterName("nginx-rr"));
  EXPECT_TRUE(IsKnownRouterName("nginx-lc"));
  EXPECT_TRUE(IsKnownRouterName("kvroute:predicted_latency"));
  EXPECT_FALSE(IsKnownRouterName("kvroute:"));
  EXPECT_FALSE(IsKnownRouterName("haproxy"));
}

TEST(SimArgvTest, PassesProfileContextLengthAndCpuTier) {
  ClusterOptions o;
  o.exe = "/bin/kvroute";
  o.profile = "deepseek-v3-h200";
  o.max_model_len = 131072;
  o.num_cpu_blocks = 48000;
  o.num_disk_blocks = 96000;
  const auto argv = SimArgv(o);
  const auto after = [&](const std::string& flag) -> std::string {
    for (std::size_t i = 0; i + 1 < argv.size(); ++i) {
      if (argv[i] == flag) return argv[i + 1];
    }
    return "<absent>";
  };
  EXPECT_EQ(argv.front(), "/bin/kvroute");
  EXPECT_EQ(after("--profile"), "deepseek-v3-h200");
  EXPECT_EQ(after("--max-model-len"), "131072");
  EXPECT_EQ(after("--num-cpu-blocks"), "48000");
  EXPECT_EQ(after("--num-disk-blocks"), "96000");
  // Bound by the sim ('*'), loopback only: a plain host:port would make it connect.
  EXPECT_EQ(after("--kv-events-endpoint"), "tcp://127.0.0.1:*");
}

TEST(SimArgvTest, DefaultsLeaveTheSimsOwnSettings) {
  ClusterOptions o;
  o.exe = "/bin/kvroute";
  const auto argv = SimArgv(o);
  for (const char* flag :
       {"--profile", "--max-model-len", "--num-cpu-blocks", "--num-disk-blocks", "--kv-store"}) {
    EXPECT_EQ(std::count(argv.begin(), argv.end(), std::string(flag)), 0) << flag;
  }
}

// How many times `needle` occurs in `text`.
std::size_t Count(const std::string& text, const std::string& needle) {
  std::size_t count = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++count;
  }
  return count;
}

ServeConfigOptions Policy(const std::string& policy, std::uint64_t seed) {
  ServeConfigOptions o;
  o.policy = policy;
  o.seed = seed;
  return o;
}

TEST(ServeYamlTest, ListsEverySimWithItsKvEventsAndThePolicy) {
  std::vector<SimInfo> sims = {{"http://127.0.0.1:9001", "tcp://127.0.0.1:7001", "m"},
                               {"http://127.0.0.1:9002", "", "m"}};
  const std::string y = ServeYaml(sims, Policy("llmd_sticky", 5));
  EXPECT_NE(y.find("  - name: sim0\n    url: http://127.0.0.1:9001\n    model: m\n"
                   "    kv_events: {endpoint: \"tcp://*:7001\"}\n"),
            std::string::npos)
      << y;
  // A sim without KV events gets no endpoint.
  EXPECT_NE(y.find("  - name: sim1\n    url: http://127.0.0.1:9002\n    model: m\nscheduler:"),
            std::string::npos)
      << y;
  EXPECT_NE(y.find("scheduler: {policy: llmd_sticky, seed: 5}\n"), std::string::npos) << y;
  EXPECT_NE(y.find("mode: precise\n"), std::string::npos) << y;
  EXPECT_TRUE(y.starts_with("listen: {host: 127.0.0.1, port: 0}\n")) << y;
}

TEST(ServeYamlTest, WritesTheSharedStoreOnlyWhenThereIsOne) {
  std::vector<SimInfo> sims = {{"http://127.0.0.1:9001", "tcp://127.0.0.1:7001", "m"}};
  ServeConfigOptions o = Policy("predicted_latency", 1);
  EXPECT_EQ(ServeYaml(sims, o).find("kv_store"), std::string::npos);
  // The store's ready-line endpoints: bound on loopback, so serve connects to its host.
  o.kv_store_events = "tcp://127.0.0.1:7100";
  o.kv_store_replay = "tcp://127.0.0.1:7101";
  const std::string y = ServeYaml(sims, o);
  EXPECT_NE(y.find("kv_store:\n  host: 127.0.0.1\n  kv_events: {endpoint: \"tcp://*:7100\", "
                   "replay_endpoint: \"tcp://127.0.0.1:7101\"}\n"),
            std::string::npos)
      << y;
}

TEST(ServeYamlTest, EveryWorkerNamesItsSimsProfile) {
  std::vector<SimInfo> sims = {{"http://127.0.0.1:1", "tcp://127.0.0.1:11", "m"},
                               {"http://127.0.0.1:2", "tcp://127.0.0.1:12", "m"}};
  EXPECT_EQ(ServeYaml(sims, Policy("llmd_sticky", 7)).find("profile"), std::string::npos);
  for (auto& s : sims) s.profile = "deepseek-v3-h200";
  const std::string y = ServeYaml(sims, Policy("llmd_sticky", 7));
  EXPECT_EQ(Count(y, "    profile: \"deepseek-v3-h200\"\n"), 2u) << y;
}

TEST(ServeYamlTest, SpedUpSimsGetProfileSpeedupOnEveryWorker) {
  std::vector<SimInfo> sims = {{"http://127.0.0.1:1", "tcp://127.0.0.1:11", "m"},
                               {"http://127.0.0.1:2", "tcp://127.0.0.1:12", "m"}};
  // Real time (speedup 1, the default) writes nothing: serve's default is 1.
  EXPECT_EQ(ServeYaml(sims, Policy("predicted_latency", 7)).find("profile_speedup"),
            std::string::npos);
  for (auto& s : sims) s.speedup = 10;
  const std::string y = ServeYaml(sims, Policy("predicted_latency", 7));
  EXPECT_EQ(Count(y, "    profile_speedup: 10\n"), 2u) << y;
}

TEST(ServeYamlTest, WritesTheItlSloOnlyWhenGiven) {
  std::vector<SimInfo> sims = {{"http://127.0.0.1:1", "tcp://127.0.0.1:11", "m"}};
  ServeConfigOptions o = Policy("predicted_latency", 7);
  EXPECT_EQ(ServeYaml(sims, o).find("itl_slo_s"), std::string::npos);
  o.itl_slo_s = 1.0 / 300;
  const std::string y = ServeYaml(sims, o);
  const auto at = y.find("itl_slo_s: ");
  ASSERT_NE(at, std::string::npos) << y;
  // Inside the scheduler map, at full precision.
  EXPECT_LT(y.find("scheduler: {policy: predicted_latency, seed: 7"), at);
  EXPECT_DOUBLE_EQ(std::stod(y.substr(at + 11)), 1.0 / 300);
}

TEST(ServeYamlTest, SetsTheLaneCountOnlyWhenGiven) {
  std::vector<SimInfo> sims = {{"http://127.0.0.1:9001", "", "m"}};
  ServeConfigOptions o = Policy("round_robin", 1);
  EXPECT_EQ(ServeYaml(sims, o).find("http_threads"), std::string::npos);
  o.lanes = 3;
  EXPECT_TRUE(ServeYaml(sims, o).starts_with(
      "listen: {host: 127.0.0.1, port: 0, http_threads: 3, proxy_threads: 3}\n"));
}

TEST(StartedSimInfoTest, AddsTheProfileAndSpeedupTheSimWasStartedWith) {
  ClusterOptions o;
  o.profile = "deepseek-v3-h200";
  o.speedup = 20;
  auto info = StartedSimInfo(
      "kvroute sim listening on http://127.0.0.1:4321 model=m kv_events=tcp://127.0.0.1:5557", o);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->url, "http://127.0.0.1:4321");
  EXPECT_EQ(info->profile, "deepseek-v3-h200");
  EXPECT_EQ(info->speedup, 20);
  EXPECT_FALSE(StartedSimInfo("something else", o).has_value());
}

TEST(WallItlSloTest, IsThePerUserTargetDividedByTheSpeedup) {
  EXPECT_DOUBLE_EQ(WallItlSlo(30, 1), 1.0 / 30);
  EXPECT_DOUBLE_EQ(WallItlSlo(30, 10), 1.0 / 300);
  EXPECT_EQ(WallItlSlo(0, 10), 0);
  EXPECT_EQ(WallItlSlo(30, 0), 0);
}

TEST(ChildProcessTest, ReadsTheReadyLineFromTheLog) {
  const std::string log = TempLog("ready.log");
  std::filesystem::remove(log);
  auto child = ChildProcess::Spawn({"/bin/sh", "-c", "echo booting; echo READY 42; sleep 30"}, log);
  ASSERT_TRUE(child.has_value()) << child.error();
  auto line = child->WaitForLine("READY", 10);
  ASSERT_TRUE(line.has_value()) << line.error();
  EXPECT_EQ(*line, "READY 42");
  child->Stop(2);
  std::filesystem::remove(log);
}

TEST(ChildProcessTest, StopLeavesNoProcessInTheGroup) {
  const std::string log = TempLog("stop.log");
  // The shell forks a grandchild sleeper that ignores SIGTERM: the group kill must get it too.
  auto child = ChildProcess::Spawn(
      {"/bin/sh", "-c", "(trap '' TERM; sleep 60) & echo started $!; wait"}, log);
  ASSERT_TRUE(child.has_value()) << child.error();
  auto line = child->WaitForLine("started", 10);
  ASSERT_TRUE(line.has_value()) << line.error();
  const pid_t grandchild = std::stoi(line->substr(8));
  const pid_t pid = child->pid();
  child->Stop(0.5);
  EXPECT_EQ(child->pid(), -1);
  EXPECT_NE(kill(pid, 0), 0);
  // The grandchild is reparented and reaped by init; give it a bounded moment to disappear.
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    gone = kill(grandchild, 0) != 0;
    if (!gone) usleep(10'000);
  }
  EXPECT_TRUE(gone);
  std::filesystem::remove(log);
}

TEST(ChildProcessTest, WaitForLineReportsAnEarlyExit) {
  const std::string log = TempLog("exit.log");
  std::filesystem::remove(log);
  auto child = ChildProcess::Spawn({"/bin/sh", "-c", "echo failing; exit 3"}, log);
  ASSERT_TRUE(child.has_value());
  auto line = child->WaitForLine("READY", 10);
  ASSERT_FALSE(line.has_value());
  EXPECT_NE(line.error().find("exited"), std::string::npos);
  std::filesystem::remove(log);
}

TEST(RouterDirNameTest, ReplacesColons) {
  EXPECT_EQ(RouterDirName("kvroute:round_robin"), "kvroute_round_robin");
  EXPECT_EQ(RouterDirName("nginx-rr"), "nginx-rr");
}

// A folder holding an executable stand-in for kvroute that runs `body` as /bin/sh.
std::string FakeExe(const std::string& name, const std::string& body) {
  const std::string dir = TempLog(name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string exe = dir + "/kvroute";
  std::ofstream(exe) << "#!/bin/sh\n" << body << "\n";
  std::filesystem::permissions(exe, std::filesystem::perms::owner_all);
  return exe;
}

TEST(SpawnServeTest, WritesTheConfigAndReturnsTheReadyLinesUrl) {
  // The stand-in checks that it was started as `serve --config <dir>/serve.yaml`.
  const std::string exe = FakeExe("serve_ok", R"([ "$1" = serve ] && [ "$2" = --config ] || exit 3
[ -f "$3" ] || exit 4
echo "kvroute serve listening on http://127.0.0.1:4242 workers=1"
exec sleep 30)");
  const std::string dir = std::filesystem::path(exe).parent_path().string();
  auto started = SpawnServe(exe, dir, "mode: precise\n", 10);
  ASSERT_TRUE(started.has_value()) << started.error();
  EXPECT_EQ(started->url, "http://127.0.0.1:4242");
  EXPECT_GT(started->process.pid(), 0);
  std::ifstream in(dir + "/serve.yaml");
  std::stringstream written;
  written << in.rdbuf();
  EXPECT_EQ(written.str(), "mode: precise\n");
  EXPECT_EQ(started->process.log_path(), dir + "/serve.log");
  started->process.Stop(1);
  std::filesystem::remove_all(dir);
}

TEST(SpawnServeTest, AnExitBeforeTheReadyLineIsAnError) {
  const std::string exe = FakeExe("serve_exit", "echo bad config; exit 2");
  const std::string dir = std::filesystem::path(exe).parent_path().string();
  auto started = SpawnServe(exe, dir, "mode: precise\n", 10);
  ASSERT_FALSE(started.has_value());
  EXPECT_TRUE(started.error().starts_with("kvroute serve: ")) << started.error();
  std::filesystem::remove_all(dir);
}

TEST(NginxForTest, EverySimIsAnUpstreamAndTheFolderIsAbsolute) {
  std::vector<SimInfo> sims = {{"http://127.0.0.1:9001", "", "m"},
                               {"http://127.0.0.1:9002", "", "m"}};
  auto n = NginxFor(sims, "relative/dir");
  ASSERT_TRUE(n.has_value()) << n.error();
  EXPECT_EQ(n->upstreams, (std::vector<std::string>{"127.0.0.1:9001", "127.0.0.1:9002"}));
  EXPECT_TRUE(std::filesystem::path(n->dir).is_absolute()) << n->dir;
  EXPECT_TRUE(n->dir.ends_with("/relative/dir")) << n->dir;
  EXPECT_GT(n->listen_port, 0);
  EXPECT_FALSE(n->least_conn);
}

TEST(FreeLoopbackPortTest, ReturnsAUsablePort) {
  auto port = FreeLoopbackPort();
  ASSERT_TRUE(port.has_value());
  EXPECT_GT(*port, 0);
  EXPECT_LT(*port, 65536);
}

}  // namespace
}  // namespace kvroute::bench

// CPU lists, pinning, process trees and the nginx configuration of `kvroute bench overhead`.
// (Its kvroute serve configuration is ServeYaml's, tested in cluster_test.cc.)
#include "bench/overhead_procs.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>

namespace kvroute::bench {
namespace {

TEST(ParseCpuList, ReadsSinglesRangesAndMixes) {
  EXPECT_EQ(*ParseCpuList("0"), std::vector<int>{0});
  EXPECT_EQ(*ParseCpuList("0-2"), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(*ParseCpuList("1,3-4,7"), (std::vector<int>{1, 3, 4, 7}));
}

TEST(ParseCpuList, EmptyMeansNoPinning) { EXPECT_TRUE(ParseCpuList("")->empty()); }

TEST(ParseCpuList, RejectsWhatIsNotACpuList) {
  EXPECT_FALSE(ParseCpuList("a"));
  EXPECT_FALSE(ParseCpuList("3-1"));
  EXPECT_FALSE(ParseCpuList("1,,2"));
  EXPECT_FALSE(ParseCpuList("-1"));
  EXPECT_FALSE(ParseCpuList("99999"));
}

TEST(PinProcess, PinsEveryThreadOfAProcess) {
  cpu_set_t before;
  ASSERT_EQ(sched_getaffinity(0, sizeof before, &before), 0);
  int first = -1;
  for (int c = 0; c < CPU_SETSIZE && first < 0; ++c) {
    if (CPU_ISSET(c, &before)) first = c;
  }
  ASSERT_GE(first, 0);
  ASSERT_TRUE(PinProcess(getpid(), {first}));
  cpu_set_t after;
  ASSERT_EQ(sched_getaffinity(0, sizeof after, &after), 0);
  EXPECT_EQ(CPU_COUNT(&after), 1);
  EXPECT_TRUE(CPU_ISSET(first, &after));
  ASSERT_EQ(sched_setaffinity(0, sizeof before, &before), 0);  // as it was
}

TEST(PinProcess, NoCpusLeavesTheProcessAlone) { EXPECT_TRUE(PinProcess(getpid(), {})); }

TEST(PinProcess, UnknownPidIsAnError) { EXPECT_FALSE(PinProcess(0x3fffffff, {0})); }

TEST(ProcessCpuSeconds, ReadsTheCpuOfALiveProcess) {
  const auto cpu = ProcessCpuSeconds(getpid());
  ASSERT_TRUE(cpu);
  EXPECT_GE(*cpu, 0);
}

TEST(ProcessCpuSeconds, UnknownPidHasNone) { EXPECT_FALSE(ProcessCpuSeconds(0x3fffffff)); }

TEST(ParseSchedStat, ReadsRunAndRunQueueNanoseconds) {
  const auto s = ParseSchedStat("1500000000 250000000 42\n");
  ASSERT_TRUE(s);
  EXPECT_DOUBLE_EQ(s->run_s, 1.5);
  EXPECT_DOUBLE_EQ(s->runq_s, 0.25);
}

TEST(ParseSchedStat, RejectsWhatIsNotASchedStatLine) {
  EXPECT_FALSE(ParseSchedStat(""));
  EXPECT_FALSE(ParseSchedStat("12"));
  EXPECT_FALSE(ParseSchedStat("x 1 2"));
  EXPECT_FALSE(ParseSchedStat("1 y 2"));
}

TEST(ProcessSchedSeconds, SumsTheThreadsOfALiveProcess) {
  // This test process has run on a CPU, so its threads' run time is positive when the kernel
  // keeps schedstat; without it there is nothing to read.
  if (!std::filesystem::exists("/proc/self/schedstat")) GTEST_SKIP() << "no schedstat";
  std::ifstream self("/proc/self/schedstat");
  std::string line;
  std::getline(self, line);
  const auto own = ParseSchedStat(line);
  ASSERT_TRUE(own) << line;
  // Some kernels (gVisor sandboxes) keep the file but write zeros: nothing to sum, and the
  // function says so rather than reporting a run-queue wait of 0.
  if (own->run_s <= 0) {
    EXPECT_FALSE(ProcessSchedSeconds(getpid()));
    GTEST_SKIP() << "the kernel writes zeros to schedstat";
  }
  const auto s = ProcessSchedSeconds(getpid());
  ASSERT_TRUE(s);
  EXPECT_GT(s->run_s, 0);
  EXPECT_GE(s->runq_s, 0);
}

TEST(ProcessSchedSeconds, UnknownPidHasNone) { EXPECT_FALSE(ProcessSchedSeconds(0x3fffffff)); }

NginxOptions OneUpstream() {
  NginxOptions n;
  n.upstreams = {"127.0.0.1:9001"};
  n.listen_port = 9000;
  n.dir = "/tmp/x";
  return n;
}

TEST(OverheadNginxConfig, OneWorkerStaysASingleProcess) {
  const std::string c = OverheadNginxConfig(OneUpstream(), 1);
  EXPECT_EQ(c, NginxConfig(OneUpstream()));
  EXPECT_NE(c.find("master_process off;"), std::string::npos);
}

TEST(OverheadNginxConfig, MoreWorkersTurnTheMasterOn) {
  // nginx ignores worker_processes without a master process.
  const std::string c = OverheadNginxConfig(OneUpstream(), 3);
  EXPECT_NE(c.find("master_process on;"), std::string::npos) << c;
  EXPECT_NE(c.find("worker_processes 3;"), std::string::npos) << c;
  EXPECT_EQ(c.find("master_process off;"), std::string::npos) << c;
  EXPECT_EQ(c.find("worker_processes 1;"), std::string::npos) << c;
}

TEST(FairPlacement, RoutersOnTheLastCpuAndTheLoadOnTheOthers) {
  const auto two = FairPlacement(2);
  ASSERT_TRUE(two);
  EXPECT_EQ(two->router, "1");
  EXPECT_EQ(two->client, "0");
  EXPECT_EQ(two->sims, "0");
  const auto eight = FairPlacement(8);
  ASSERT_TRUE(eight);
  EXPECT_EQ(eight->router, "7");
  EXPECT_EQ(eight->client, "0-6");
  EXPECT_EQ(*ParseCpuList(eight->sims), (std::vector<int>{0, 1, 2, 3, 4, 5, 6}));
}

TEST(FairPlacement, NeedsTwoCpus) { EXPECT_FALSE(FairPlacement(1)); }

TEST(ProcessTree, FindsAChildProcess) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    pause();  // until the parent kills it
    _exit(0);
  }
  const auto tree = ProcessTree(getpid());
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  ASSERT_FALSE(tree.empty());
  EXPECT_EQ(tree.front(), getpid());
  EXPECT_NE(std::find(tree.begin(), tree.end(), child), tree.end());
}

TEST(ProcessTree, UnknownPidIsEmpty) { EXPECT_TRUE(ProcessTree(0x3fffffff).empty()); }

TEST(TreeCpuSeconds, CountsAtLeastTheProcessItself) {
  const auto own = ProcessCpuSeconds(getpid());
  const auto tree = TreeCpuSeconds(getpid());
  ASSERT_TRUE(own);
  ASSERT_TRUE(tree);
  EXPECT_GE(*tree, *own);
  EXPECT_FALSE(TreeCpuSeconds(0x3fffffff));
}

}  // namespace
}  // namespace kvroute::bench

// Builders shared by the simulator's unit tests: small fleets and workloads that run in
// milliseconds. Test-only.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "sched/registry.h"
#include "simulate/simulator.h"

namespace kvroute::simulate::testing {

inline WorkerSpec SmallWorker() {
  WorkerSpec s;
  auto p = engine::LoadProfile(engine::kDefaultProfileName);
  EXPECT_TRUE(p.has_value());
  s.profile = *p;
  s.config.num_gpu_blocks_override = 4096;  // small pool: fast to build, room for the tests
  return s;
}

inline SimOptions Options(int workers, std::string_view preset) {
  SimOptions o;
  for (int i = 0; i < workers; ++i) o.fleet.workers.push_back(SmallWorker());
  auto policy = sched::BuiltinPolicy(preset);
  EXPECT_TRUE(policy.has_value());
  if (policy) o.policy = *policy;
  return o;
}

inline AgenticSimOptions SmallAgentic(int sessions, int turns) {
  AgenticSimOptions a;
  a.shape.sessions = sessions;
  a.shape.common_prefix_tokens = 256;
  a.shape.session_prefix_tokens = 512;
  a.shape.turns = turns;
  a.shape.turn_input_tokens = 128;
  a.shape.output_tokens = 16;
  a.concurrency = sessions;
  return a;
}

inline SharedPrefixSimOptions SmallSharedPrefix(int groups, int per_group, double rate) {
  SharedPrefixSimOptions s;
  s.shape.groups = groups;
  s.shape.prompts_per_group = per_group;
  s.shape.system_prompt_tokens = 400;
  s.shape.question_tokens = 100;
  s.shape.output_tokens = 8;
  s.rate_per_s = rate;
  return s;
}

// Workers each session's turns went to.
inline std::map<int, std::set<WorkerId>> WorkersBySession(const SimResult& r) {
  std::map<int, std::set<WorkerId>> out;
  for (const DecisionRecord& d : r.decisions) {
    out[r.level.requests[d.request].session].insert(d.worker);
  }
  return out;
}

}  // namespace kvroute::simulate::testing

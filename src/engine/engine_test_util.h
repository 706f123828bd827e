// Helpers shared by the engine's tests: drive an Engine to completion and collect what it
// produced. Test-only.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/profile.h"

namespace kvroute::engine::enginetest {

inline Profile TestProfile() {
  auto p = LoadProfile(kDefaultProfileName);
  EXPECT_TRUE(p.has_value());
  return p.value_or(Profile{});
}

// An engine with exactly this many blocks per local tier (0: the tier is off); every other
// setting at its default.
inline EngineConfig BlocksConfig(std::int64_t gpu_blocks, std::int64_t cpu_blocks = 0,
                                 std::int64_t disk_blocks = 0) {
  EngineConfig c;
  c.num_gpu_blocks_override = gpu_blocks;
  c.num_cpu_blocks = cpu_blocks;
  c.disk.num_blocks = disk_blocks;
  return c;
}

// Tokens start, start+1, ... (n of them).
inline std::vector<TokenId> Seq(std::size_t n, TokenId start = 1) {
  std::vector<TokenId> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

inline RequestSpec Req(std::string id, std::vector<TokenId> prompt, std::uint32_t max_tokens,
                       bool ignore_eos = true) {
  RequestSpec s;
  s.id = std::move(id);
  s.prompt = std::move(prompt);
  s.max_tokens = max_tokens;
  s.ignore_eos = ignore_eos;
  return s;
}

struct Trace {
  std::vector<StepResult> steps;
  std::map<std::string, std::vector<TokenId>> tokens;
  std::map<std::string, FinishReason> finish;
  std::map<std::string, std::uint32_t> cached;
  std::vector<kv::KvEvent> events;
  Nanos now{0};
};

// One step, recorded.
inline const StepResult& StepOnce(Engine& engine, Trace* run) {
  StepResult r = engine.Step(run->now);
  run->now += r.duration;
  for (const TokenEvent& t : r.tokens) {
    run->tokens[t.request_id].push_back(t.token);
    if (t.is_first) run->cached[t.request_id] = t.cached_tokens;
    if (t.finished) run->finish[t.request_id] = *t.finished;
  }
  run->events.insert(run->events.end(), r.kv_events.begin(), r.kv_events.end());
  run->steps.push_back(std::move(r));
  return run->steps.back();
}

// Steps until the engine has no work (at most max_steps).
inline void Drive(Engine& engine, Trace* run, int max_steps = 10000) {
  for (int i = 0; i < max_steps && engine.HasWork(); ++i) StepOnce(engine, run);
  EXPECT_FALSE(engine.HasWork()) << "engine did not drain within " << max_steps << " steps";
}

// Drive, also waking at the engine's timed events (async loads, remote KV, pin expiry), as
// kvroute sim's loop and kvroute simulate do.
inline void DriveTimed(Engine& engine, Trace* run, int max_steps = 10000) {
  for (int i = 0; i < max_steps; ++i) {
    if (!engine.HasWork()) {
      const auto next = engine.NextTimedEvent();
      if (!next) return;
      run->now = std::max(run->now, *next);
    }
    StepOnce(engine, run);
  }
  ADD_FAILURE() << "engine did not drain within " << max_steps << " steps";
}

template <typename T>
std::vector<T> EventsOf(const std::vector<kv::KvEvent>& events) {
  std::vector<T> out;
  for (const kv::KvEvent& e : events) {
    if (const T* x = std::get_if<T>(&e)) out.push_back(*x);
  }
  return out;
}

}  // namespace kvroute::engine::enginetest

// The seeded prompt mix of the KV index end-to-end check (kv_e2e_check.cc): token-id prompts
// that share prefixes the way real traffic does, so the index sees chains that branch, grow
// and get evicted.
//
//   sessions   multi-turn growth: turn k's prompt is turn k-1's plus 20..60 new tokens
//   siblings   one shared system prefix (3 blocks) with distinct tails
//   unrelated  random prompts of 30..220 tokens
//
// The order interleaves the three kinds (seeded shuffle), but a session's turns stay in order.
// Token ids are drawn from [1000, 30000), inside every tokenizer's vocabulary.
//
// Thread safety: pure function.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "common/types.h"

namespace kvroute::kv_e2e {

inline std::vector<std::vector<TokenId>> MakeWorkload(std::uint64_t seed, int sessions, int turns,
                                                      int siblings, int unrelated) {
  std::mt19937_64 rng(seed);
  auto tokens = [&rng](int n) {
    std::uniform_int_distribution<TokenId> id(1000, 29999);
    std::vector<TokenId> out(n);
    for (auto& t : out) t = id(rng);
    return out;
  };
  auto between = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };

  // Each lane is a sequence of prompts that must be sent in order (a session), or one prompt.
  std::vector<std::vector<std::vector<TokenId>>> lanes;
  for (int s = 0; s < sessions; ++s) {
    std::vector<std::vector<TokenId>> lane;
    std::vector<TokenId> prompt = tokens(between(40, 80));
    for (int t = 0; t < turns; ++t) {
      lane.push_back(prompt);
      auto more = tokens(between(20, 60));
      prompt.insert(prompt.end(), more.begin(), more.end());
    }
    lanes.push_back(std::move(lane));
  }
  const std::vector<TokenId> system = tokens(48);
  for (int s = 0; s < siblings; ++s) {
    std::vector<TokenId> prompt = system;
    auto tail = tokens(between(10, 90));
    prompt.insert(prompt.end(), tail.begin(), tail.end());
    lanes.push_back({std::move(prompt)});
  }
  for (int u = 0; u < unrelated; ++u) lanes.push_back({tokens(between(30, 220))});

  // Interleave: repeatedly take the next prompt of a random non-empty lane.
  std::vector<std::vector<TokenId>> out;
  std::vector<std::size_t> next(lanes.size(), 0);
  std::vector<std::size_t> open(lanes.size());
  for (std::size_t i = 0; i < open.size(); ++i) open[i] = i;
  while (!open.empty()) {
    std::size_t k = std::uniform_int_distribution<std::size_t>(0, open.size() - 1)(rng);
    std::size_t lane = open[k];
    out.push_back(lanes[lane][next[lane]++]);
    if (next[lane] == lanes[lane].size()) {
      open[k] = open.back();
      open.pop_back();
    }
  }
  return out;
}

}  // namespace kvroute::kv_e2e

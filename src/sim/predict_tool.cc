// kvroute_sim_predict: prints the engine model's own predictions for one request alone on the
// server — TTFT (the prefill step) and the first decode steps (ITL) — so that the sim's
// measured latencies can be compared with the formula (docs/benchmarks.md, "kvroute sim").
//
//   kvroute_sim_predict <profile> <prompt_tokens> <output_tokens>
// prints JSON: {"ttft_s":…, "itl_s":[…], "itl_mean_s":…}
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "common/types.h"
#include "engine/profile.h"
#include "engine/step_time.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s <profile> <prompt_tokens> <output_tokens>\n", argv[0]);
    return 2;
  }
  auto profile = kvroute::engine::LoadProfile(argv[1]);
  if (!profile) {
    std::fprintf(stderr, "%s\n", profile.error().c_str());
    return 2;
  }
  const auto prompt = static_cast<std::uint32_t>(std::strtoul(argv[2], nullptr, 10));
  const auto output = static_cast<std::uint32_t>(std::strtoul(argv[3], nullptr, 10));
  kvroute::engine::StepTimeModel model(*profile);
  double ttft = kvroute::ToSeconds(model.PrefillTime(prompt, 0));
  std::vector<double> itl;
  double sum = 0;
  // Token i (i >= 1) comes from a decode step over prompt + i tokens of context.
  for (std::uint32_t i = 1; i < output; ++i) {
    itl.push_back(kvroute::ToSeconds(model.DecodeStepTime(1, prompt + i)));
    sum += itl.back();
  }
  std::printf("{\"ttft_s\":%.9f,\"itl_mean_s\":%.9f,\"itl_first_s\":%.9f,\"itl_last_s\":%.9f}\n",
              ttft, itl.empty() ? 0.0 : sum / static_cast<double>(itl.size()),
              itl.empty() ? 0.0 : itl.front(), itl.empty() ? 0.0 : itl.back());
  return 0;
}

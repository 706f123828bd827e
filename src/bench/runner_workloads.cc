// Runner::Run: the level ladder of each workload (agentic concurrency sweep with Infera's stop
// rule, shared-prefix Poisson rates, a trace replay), built on the level machinery of runner.cc.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

// As in runner.cc: GCC 12's false -Wmismatched-new-delete on Asio's coroutine frames.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include "bench/runner_levels.h"
#include "bench/runner_request.h"
#include "workload/sweep_stop.h"
#include "workload/time_base.h"
#include "workload/trace.h"
#include "workload/trace_expand.h"

namespace kvroute::bench::runner_internal {

std::expected<void, std::string> Runner::Run(workload::RunReport& report) {
  report.target = options_.target_url;
  report.workload = options_.workload;
  report.started_at = NowIso8601();
  if (options_.time_scale <= 0)
    return std::unexpected("the time scale (--speedup) must be positive");
  report.time_scale = options_.time_scale;
  report.stop_mean_itl_s = options_.workload == "agentic" ? options_.stop_mean_itl_s : 0;
  report.sweep_stop.reset();
  const double time_scale = options_.time_scale;
  model_ = options_.model.empty() ? RunSync(ioc_, DiscoverModel()) : options_.model;

  if (options_.workload == "agentic") {
    for (std::size_t li = 0; li < options_.concurrency.size(); ++li) {
      const int c = options_.concurrency[li];
      if (c <= 0) return std::unexpected("concurrency levels must be positive");
      workload::LevelResult shape;
      shape.name = "c=" + std::to_string(c);
      shape.concurrency = c;
      auto ok = RunLevel(report, std::move(shape), [&, c, li](LevelState& level) {
        return AgenticLevel(level, c, static_cast<int>(li));
      });
      if (!ok) return ok;
      const workload::LevelResult& ran = report.levels.back();
      auto stop =
          workload::SweepStopAfter(ran.name, workload::SummarizeLevel(ran, std::nullopt).itl, options_.stop_mean_itl_s);
      if (stop && li + 1 < options_.concurrency.size()) {
        stop->skipped.assign(options_.concurrency.begin() + static_cast<std::ptrdiff_t>(li) + 1,
                             options_.concurrency.end());
        report.sweep_stop = std::move(stop);
        if (options_.progress) {
          std::fprintf(stderr, "[bench] %s\n",
                       workload::SweepStopNote(*report.sweep_stop, options_.stop_mean_itl_s).c_str());
        }
        break;
      }
    }
    return {};
  }

  if (options_.workload == "shared-prefix") {
    for (std::size_t li = 0; li < options_.rates.size(); ++li) {
      const double rate = options_.rates[li];
      if (rate <= 0) return std::unexpected("rates must be positive");
      workload::SharedPrefixOptions sp = options_.shared_prefix;
      sp.seed = options_.seed + 1000003ull * li;
      auto prompts = std::make_shared<std::vector<workload::SharedPrefixPrompt>>(
          workload::MakeSharedPrefixPrompts(*options_.tokenizer, sp));
      if (prompts->empty()) return std::unexpected("the shared-prefix workload has no prompts");
      // `rate` is per model second (the report's time base); --duration is wall seconds, so a
      // duration-bounded level sends duration x time_scale x rate requests.
      int count = options_.requests_per_rate;
      if (count <= 0) {
        count = options_.duration_s > 0
                    ? static_cast<int>(std::ceil(options_.duration_s * time_scale * rate))
                    : static_cast<int>(prompts->size());
      }
      count = std::min(count, kHardMaxRequests);
      workload::LevelResult shape;
      char rate_text[32];
      std::snprintf(rate_text, sizeof rate_text, "%g", rate);
      shape.name = std::string("rate=") + rate_text;
      shape.rate_per_s = rate;
      auto ok = RunLevel(report, std::move(shape), [&, prompts, rate, count](LevelState& level) {
        return OpenLoopLevel(
            level, workload::ToWallTime(workload::PoissonArrivals(count, rate, sp.seed), time_scale),
            [this, prompts](int i) {
              const workload::SharedPrefixPrompt& p = (*prompts)[i % prompts->size()];
              std::vector<Message> msgs{{"system", p.system_prompt}, {"user", p.question}};
              return std::pair(std::string("/v1/chat/completions"),
                               ChatRequestBody(model_, msgs, p.output_tokens));
            },
            [prompts](int i) { return (*prompts)[i % prompts->size()].group; });
      });
      if (!ok) return ok;
    }
    return {};
  }

  if (options_.workload == "trace") {
    if (options_.trace_path.empty()) return std::unexpected("--trace FILE is required");
    auto trace = workload::LoadTrace(options_.trace_path);
    if (!trace) return std::unexpected(options_.trace_path + ": " + trace.error());
    if (options_.trace_speedup <= 0) return std::unexpected("--trace-speedup must be positive");
    auto shared = std::make_shared<workload::Trace>(std::move(*trace));
    auto palette = std::make_shared<std::vector<TokenId>>(
        VocabularyPalette(*options_.tokenizer, options_.seed));
    std::vector<double> arrivals;
    std::size_t n = shared->requests.size();
    if (options_.max_requests > 0) n = std::min<std::size_t>(n, options_.max_requests);
    for (std::size_t i = 0; i < n; ++i) {
      arrivals.push_back(shared->requests[i].arrival_s / options_.trace_speedup);
    }
    // arrivals are model seconds here; the rate is reported per model second, and the sends
    // are scheduled in wall seconds (sims at speedup S run S model seconds per wall second).
    workload::LevelResult shape;
    shape.name = "trace";
    if (n > 1 && arrivals.back() > 0) shape.rate_per_s = static_cast<double>(n) / arrivals.back();
    arrivals = workload::ToWallTime(std::move(arrivals), time_scale);
    const std::uint32_t block = shared->hash_block_tokens > 0 ? shared->hash_block_tokens : 512;
    return RunLevel(report, std::move(shape), [&, shared, palette, block](LevelState& level) {
      return OpenLoopLevel(
          level, arrivals,
          [this, shared, palette, block](int i) {
            const workload::TraceRequest& r = shared->requests[i];
            workload::ExpandOptions eo{
                .prefix_multiplier = options_.prefix_multiplier,
                .unique_salt = options_.seed * 1'000'003ull + static_cast<std::uint64_t>(i)};
            std::vector<TokenId> prompt = workload::ExpandPrompt(r, block, *palette, eo);
            return std::pair(
                std::string("/v1/completions"),
                CompletionRequestBody(model_, prompt, std::max<std::uint32_t>(1, r.output_tokens)));
          },
          [](int) { return -1; });
    });
  }
  return std::unexpected("unknown workload '" + options_.workload +
                         "' (agentic, shared-prefix, trace)");
}


}  // namespace kvroute::bench::runner_internal

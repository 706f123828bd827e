#include "simulate/run.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <tuple>
#include <string>
#include <utility>

#include "common/duration.h"
#include "sched/registry.h"
#include "simulate/fleet.h"
#include "simulate/simulator.h"
#include "workload/trace.h"

namespace kvroute::simulate {
namespace {

std::expected<Fleet, std::string> BuildFleet(const RunOptions& f) {
  auto profile = engine::LoadProfile(f.profile);
  if (!profile) return std::unexpected("--profile: " + profile.error());
  WorkerSpec base;
  base.profile = std::move(*profile);
  base.config.block_size = f.block_size;
  base.config.max_num_seqs = f.max_num_seqs;
  base.config.max_num_batched_tokens = f.max_num_batched_tokens;
  base.config.num_gpu_blocks_override = f.num_gpu_blocks;
  base.config.num_cpu_blocks = f.num_cpu_blocks;
  base.config.disk.num_blocks = f.num_disk_blocks;
  base.config.async_tier_loads = f.async_tier_loads;
  for (const auto& [flag, value] : {std::pair{"--disk-read-bandwidth", f.disk_read_bandwidth},
                                    std::pair{"--kv-store-bandwidth", f.kv_store_bandwidth}}) {
    if (!(value >= 0) || !std::isfinite(value)) {
      return std::unexpected(std::string(flag) +
                             " must be a finite number >= 0 (bytes/s; 0: the engine model's)");
    }
  }
  if (!std::isfinite(f.kv_store_latency_s)) {
    return std::unexpected("--kv-store-latency must be a finite number of seconds");
  }
  if (f.disk_read_bandwidth > 0) base.config.disk.read_bytes_per_s = f.disk_read_bandwidth;
  if (f.kv_store_bandwidth > 0) base.config.shared.read_bytes_per_s = f.kv_store_bandwidth;
  if (f.kv_store_latency_s >= 0) base.config.shared.latency_s = f.kv_store_latency_s;
  base.config.max_model_len = f.max_model_len;
  Fleet fleet;
  if (!f.fleet_file.empty()) {
    std::ifstream in(f.fleet_file);
    if (!in) return std::unexpected("--fleet: cannot read " + f.fleet_file);
    std::stringstream text;
    text << in.rdbuf();
    auto parsed = ParseFleetYaml(text.str(), base);
    if (!parsed) return std::unexpected("--fleet " + f.fleet_file + ": " + parsed.error());
    fleet = std::move(*parsed);
  } else {
    if (f.workers <= 0) return std::unexpected("--workers must be positive");
    fleet.workers.assign(static_cast<std::size_t>(f.workers), base);
  }
  using Kind = FleetChange::Kind;
  for (const auto& [kind, values] :
       {std::pair{Kind::kFail, &f.fail}, {Kind::kRestart, &f.restart}, {Kind::kAdd, &f.add}}) {
    for (const std::string& v : *values) {
      auto c = ParseChangeFlag(kind, v, base);
      if (!c) return std::unexpected(c.error());
      fleet.changes.push_back(std::move(*c));
    }
  }
  SortChanges(&fleet);
  if (auto ok = ValidateFleet(fleet); !ok) return std::unexpected(ok.error());
  return fleet;
}

std::expected<std::shared_ptr<const sched::Policy>, std::string> BuildPolicy(
    const RunOptions& f) {
  if (!f.policy_file.empty()) {
    std::ifstream in(f.policy_file);
    if (!in) return std::unexpected("--policy-file: cannot read " + f.policy_file);
    std::stringstream text;
    text << in.rdbuf();
    auto p = sched::Registry::Builtin().ParsePolicy(text.str());
    if (!p) return std::unexpected("--policy-file: " + p.error().message);
    return *p;
  }
  auto p = sched::BuiltinPolicy(f.policy);
  if (!p) return std::unexpected("--policy: " + p.error().message);
  return *p;
}

}  // namespace

std::expected<RunOutput, std::string> RunSimulation(
    RunOptions f, const std::function<void(const std::string&)>& log) {
  auto fail = [](std::string msg) { return std::unexpected(std::move(msg)); };
  auto fleet = BuildFleet(f);
  if (!fleet) return fail(fleet.error());
  auto policy = BuildPolicy(f);
  if (!policy) return fail(policy.error());
  SimOptions base;
  base.fleet = std::move(*fleet);
  base.policy = *policy;
  const bool has_prefill_worker =
      std::any_of(base.fleet.workers.begin(), base.fleet.workers.end(),
                  [](const WorkerSpec& w) { return w.role == sched::Role::kPrefill; });
  if (!f.pd_rule.empty() || has_prefill_worker) {
    const std::string rule_name = f.pd_rule.empty() ? "cost" : f.pd_rule;
    auto rule = sched::ParsePdRule(rule_name);
    if (!rule) {
      return fail("--pd-rule: '" + rule_name + "' is not one of cost, dynamo_token_cap, llmd_non_cached");
    }
    sched::PdOptions pd;
    pd.rule = *rule;
    pd.token_cap = f.pd_token_cap;
    pd.non_cached_tokens = f.pd_non_cached_tokens;
    if (f.pd_itl_slo_s < 0) return fail("--pd-itl-slo must be >= 0");
    if (f.pd_itl_slo_s > 0) pd.itl_slo_s = f.pd_itl_slo_s;
    if (!(f.pd_stall >= 0)) return fail("--pd-stall must be >= 0");
    pd.slowdown.stall = f.pd_stall;
    if (!(f.pd_chunk_stall >= 0) || !std::isfinite(f.pd_chunk_stall)) {
      return fail("--pd-chunk-stall must be a finite number >= 0");
    }
    pd.chunk_stall = f.pd_chunk_stall;
    if (!(f.pd_queue_behind >= 0)) return fail("--pd-queue-behind must be >= 0");
    pd.queue_behind = f.pd_queue_behind;
    // The stall model's chunk size is the step budget of the workers that would prefill beside
    // running decodes (mixed and decode ones; the smallest, when they differ).
    std::uint32_t budget = 0;
    for (const WorkerSpec& w : base.fleet.workers) {
      if (w.role == sched::Role::kPrefill || w.config.max_num_batched_tokens == 0) continue;
      budget = budget == 0 ? w.config.max_num_batched_tokens
                           : std::min(budget, w.config.max_num_batched_tokens);
    }
    if (budget > 0) pd.slowdown.chunk_tokens = budget;
    base.pd = pd;
  }
  base.seed = f.seed;
  base.max_requests = f.max_requests;
  base.predicted_overlay = !f.no_overlay;
  if (!(f.router_tier_bandwidth_scale > 0) || !std::isfinite(f.router_tier_bandwidth_scale)) {
    return fail("--router-tier-bandwidth-scale must be > 0");
  }
  base.router_tier_bandwidth_scale = f.router_tier_bandwidth_scale;
  base.learn_tier_bandwidths = !f.no_tier_learning;
  base.progress = f.progress;
  for (auto [text, out, name] : {std::tuple{&f.event_delay, &base.event_delay, "--event-delay"},
                                 {&f.scrape_interval, &base.scrape_interval, "--scrape-interval"},
                                 {&f.predicted_ttl, &base.predicted_ttl, "--predicted-ttl"},
                                 {&f.duration, &base.duration, "--duration"},
                                 {&f.router_delay, &base.router_delay, "--router-delay"},
                                 {&f.router_delay_per_1k, &base.router_delay_per_1k_tokens,
                                  "--router-delay-per-1k-tokens"}}) {
    auto d = ParseDuration(*text);
    if (!d) return fail(std::string(name) + ": " + d.error());
    *out = *d;
  }
  if (base.scrape_interval.count() <= 0) return fail("--scrape-interval must be positive");
  if (f.kv_store_gb < 0) return fail("--kv-store-gb must be >= 0");
  if (f.kv_store_gb > 0) {
    auto ttl = ParseDuration(f.kv_store_ttl);
    if (!ttl) return fail("--kv-store-ttl: " + ttl.error());
    base.shared_store = store::StoreOptions{
        .capacity_bytes = f.kv_store_gb * 1e9, .ttl = *ttl, .block_size = f.block_size};
  }
  base.store_leases = !f.no_store_leases;
  auto think = ParseDuration(f.think_time);
  if (!think) return fail("--think-time: " + think.error());
  auto jitter = ParseDuration(f.turn_jitter);
  if (!jitter) return fail("--turn-jitter: " + jitter.error());
  if (f.output_tokens > 0) {
    f.agentic.output_tokens = static_cast<std::uint32_t>(f.output_tokens);
    f.shared_prefix.output_tokens = static_cast<std::uint32_t>(f.output_tokens);
  }
  f.agentic.seed = f.shared_prefix.seed = f.seed;

  // One level per concurrency / rate / the trace, each on a fresh cluster.
  struct LevelPlan {
    std::string name;
    int concurrency = 0;
    double rate = 0;
    std::unique_ptr<Workload> workload;
  };
  std::vector<LevelPlan> plans;
  if (f.workload == "agentic") {
    for (int c : f.concurrency) {
      if (c <= 0) return fail("--concurrency values must be positive");
      AgenticSimOptions a{f.agentic, c, *think, *jitter, f.procedure};
      plans.push_back({"c=" + std::to_string(c), c, 0, NewAgenticWorkload(a)});
    }
  } else if (f.workload == "shared-prefix") {
    for (double r : f.rates) {
      if (r <= 0) return fail("--rates values must be positive");
      SharedPrefixSimOptions s{f.shared_prefix, r, f.requests_per_rate};
      char text[32];
      std::snprintf(text, sizeof text, "%g", r);
      plans.push_back({std::string("rate=") + text, 0, r, NewSharedPrefixWorkload(s)});
    }
  } else {
    if (f.trace_path.empty()) return fail("--trace FILE is required");
    if (f.trace_speedup <= 0 || f.trace_replicas <= 0 || f.prefix_multiplier <= 0) {
      return fail("--trace-speedup, --trace-replicas and --prefix-multiplier must be positive");
    }
    auto trace = workload::LoadTrace(f.trace_path);
    if (!trace) return fail(f.trace_path + ": " + trace.error());
    double rate = 0;
    if (trace->requests.size() > 1 && trace->requests.back().arrival_s > 0) {
      rate = static_cast<double>(trace->requests.size()) * f.trace_replicas * f.trace_speedup /
             trace->requests.back().arrival_s;
    }
    TraceSimOptions t{f.trace_speedup, f.prefix_multiplier, f.trace_replicas, f.seed};
    plans.push_back(
        {"trace", 0, rate,
         NewTraceWorkload(std::make_shared<const workload::Trace>(std::move(*trace)), t)});
  }

  workload::RunReport report;
  report.label = f.label;
  report.target = "simulate";
  report.workload = f.workload;
  report.itl_targets_tps = f.itl_targets;
  if (f.ttft_slo > 0 && f.tpot_slo > 0) {
    report.slo = workload::SloTargets{f.ttft_slo, f.tpot_slo, f.slo_attainment};
  }
  report.config = {
      {"policy", f.policy_file.empty() ? f.policy : f.policy_file},
      {"profile", f.fleet_file.empty() ? f.profile : f.fleet_file},
      {"workers", static_cast<double>(base.fleet.workers.size())},
      {"event_delay_s", ToSeconds(base.event_delay)},
      {"router_delay_s", ToSeconds(base.router_delay)},
      {"router_delay_per_1k_tokens_s", ToSeconds(base.router_delay_per_1k_tokens)},
      {"scrape_interval_s", ToSeconds(base.scrape_interval)},
      {"predicted_overlay", f.no_overlay ? std::string("off") : std::string("on")},
      {"router_tier_bandwidth_scale", f.router_tier_bandwidth_scale},
      {"tier_learning", f.no_tier_learning ? std::string("off") : std::string("on")},
      {"seed", static_cast<double>(f.seed)},
      {"max_requests", static_cast<double>(f.max_requests)},
  };
  if (f.max_model_len > 0) {
    report.config.push_back({"max_model_len", static_cast<double>(f.max_model_len)});
  }
  if (base.pd) {  // only P/D runs name it: aggregated runs' files stay as they were
    report.config.push_back({"pd_rule", std::string(sched::PdRuleName(base.pd->rule))});
    report.config.push_back({"pd_stall", base.pd->slowdown.stall});
    if (base.pd->chunk_stall > 0) {  // named only when on: default runs' files stay as they were
      report.config.push_back({"pd_chunk_stall", base.pd->chunk_stall});
      report.config.push_back(
          {"pd_chunk_tokens", static_cast<double>(base.pd->slowdown.chunk_tokens)});
    }
    report.config.push_back({"pd_queue_behind", base.pd->queue_behind});
    if (base.pd->rule == sched::PdRule::kTokenCap) {
      report.config.push_back({"pd_token_cap", static_cast<double>(base.pd->token_cap)});
    } else if (base.pd->rule == sched::PdRule::kNonCachedTokens) {
      report.config.push_back(
          {"pd_non_cached_tokens", static_cast<double>(base.pd->non_cached_tokens)});
    }
  }
  // Tier settings only when used, so reports of runs without them are what they were.
  if (f.num_disk_blocks > 0) {
    report.config.push_back({"num_disk_blocks", static_cast<double>(f.num_disk_blocks)});
  }
  if (f.async_tier_loads) report.config.push_back({"async_tier_loads", 1.0});
  if (f.disk_read_bandwidth > 0) {
    report.config.push_back({"disk_read_bytes_per_s", f.disk_read_bandwidth});
  }
  if (f.kv_store_bandwidth > 0) {
    report.config.push_back({"kv_store_bytes_per_s", f.kv_store_bandwidth});
  }
  if (f.kv_store_latency_s >= 0) report.config.push_back({"kv_store_latency_s", f.kv_store_latency_s});
  if (f.kv_store_gb > 0) {
    report.config.push_back({"kv_store_gb", f.kv_store_gb});
    report.config.push_back({"kv_store_ttl_s", ToSeconds(base.shared_store->ttl)});
    report.config.push_back({"kv_store_leases", base.store_leases ? 1.0 : 0.0});
  }
  const auto append = [&](std::vector<workload::ConfigEntry> entries) {
    report.config.insert(report.config.end(), entries.begin(), entries.end());
  };
  if (f.workload == "agentic") {
    append(workload::AgenticConfig(f.agentic, *think, *jitter, f.procedure));
  } else if (f.workload == "shared-prefix") {
    append(workload::SharedPrefixConfig(f.shared_prefix, static_cast<double>(f.requests_per_rate)));
  } else {
    report.config.insert(report.config.end(),
                         {{"trace", f.trace_path},
                          {"trace_speedup", f.trace_speedup},
                          {"trace_replicas", static_cast<double>(f.trace_replicas)},
                          {"prefix_multiplier", f.prefix_multiplier}});
  }

  std::vector<SimLevelExtras> extras;
  for (LevelPlan& plan : plans) {
    Simulator sim(base, std::move(plan.workload));
    auto result = sim.Run();
    if (!result) return fail(plan.name + ": " + result.error());
    report.gpus = result->gpus;
    const std::size_t n = result->level.requests.size();
    result->level.concurrency = plan.concurrency;
    result->level.rate_per_s = plan.rate;
    extras.push_back(AppendLevel(std::move(*result), plan.name, &report));
    log(RunLine(extras.back(), n));
    const std::string calibration = CalibrationLine(report.levels.back(), extras.back());
    if (!calibration.empty()) log(calibration);
    const std::string pd = PdLine(report.levels.back(), extras.back());
    if (!pd.empty()) log(pd);
    const std::string shared = SharedCreditLine(extras.back());
    if (!shared.empty()) log(shared);
    const std::string tiers = TierLearningLine(plan.name, sim.router_state());
    if (!tiers.empty()) log(tiers);
  }
  return RunOutput{std::move(report), std::move(extras)};
}

}  // namespace kvroute::simulate

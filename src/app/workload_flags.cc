#include "app/workload_flags.h"

namespace kvroute::app {

void AddWorkloadFlags(CLI::App* cmd, const WorkloadFlagTargets& t) {
  cmd->add_option("--workload", *t.workload, "agentic | shared-prefix | trace")
      ->capture_default_str()
      ->check(CLI::IsMember({"agentic", "shared-prefix", "trace"}));
  // Agentic.
  cmd->add_option("--concurrency", *t.concurrency,
                  "Agentic: concurrent sessions (closed loop); a list sweeps: 1,2,4,8")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--sessions", t.agentic->sessions,
                  "Agentic: sessions per level; 0: the level's concurrency (each session runs all "
                  "its turns; a client that finishes one starts the next)")
      ->capture_default_str();
  cmd->add_option("--common-prefix-tokens", t.agentic->common_prefix_tokens,
                  "Agentic: system prompt shared by every session")
      ->capture_default_str();
  cmd->add_option("--session-prefix-tokens", t.agentic->session_prefix_tokens,
                  "Agentic: per-session prefix on the first turn")
      ->capture_default_str();
  cmd->add_option("--turns", t.agentic->turns, "Agentic: user turns per session")
      ->capture_default_str();
  cmd->add_option("--turn-input-tokens", t.agentic->turn_input_tokens,
                  "Agentic: new user tokens per turn")
      ->capture_default_str();
  cmd->add_option("--think-time", *t.think_time,
                  "Agentic: the client's pause after each request, in model time (100ms, 1s; "
                  "`bench` waits 1/--speedup of it in wall time)")
      ->capture_default_str();
  cmd->add_option("--turn-jitter", *t.turn_jitter,
                  "Agentic: each pause also adds a seeded uniform draw in [0, J) of model time, "
                  "the same draw in `bench` and `simulate` for a seed, session and turn (breaks "
                  "the lockstep of sessions that start together)")
      ->capture_default_str();
  cmd->add_flag("--warmup-step", t.procedure->warmup_step,
                "Agentic: as vLLM's multi-turn benchmark tool (Infera's sweep): every session's "
                "first turn is sent first and not measured; the measured pass starts at the "
                "second turns once all are done");
  cmd->add_flag("--early-stop", t.procedure->early_stop,
                "Agentic: as vLLM's multi-turn benchmark tool (Infera's sweep): a level ends when "
                "the first client runs out of sessions; nothing is sent after, requests in "
                "flight finish and count");
  cmd->add_option("--output-tokens", *t.output_tokens,
                  "max_tokens of every request (default: agentic " +
                      std::to_string(t.agentic->output_tokens) + ", shared-prefix " +
                      std::to_string(t.shared_prefix->output_tokens) + ")");
  // Shared prefix.
  cmd->add_option("--rates", *t.rates,
                  "Shared-prefix: Poisson request rates per model second; a list sweeps: 1,2,4")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--requests-per-rate", *t.requests_per_rate,
                  "Shared-prefix: requests per rate (0: every prompt once, cut at --duration)");
  cmd->add_option("--groups", t.shared_prefix->groups, "Shared-prefix: groups")
      ->capture_default_str();
  cmd->add_option("--prompts-per-group", t.shared_prefix->prompts_per_group,
                  "Shared-prefix: prompts per group")
      ->capture_default_str();
  cmd->add_option("--system-prompt-tokens", t.shared_prefix->system_prompt_tokens,
                  "Shared-prefix: system prompt shared by a group")
      ->capture_default_str();
  cmd->add_option("--question-tokens", t.shared_prefix->question_tokens,
                  "Shared-prefix: question per prompt")
      ->capture_default_str();
  // Trace.
  cmd->add_option("--trace", *t.trace_path, "Trace: Mooncake .jsonl or Azure .csv file");
  cmd->add_option("--trace-speedup", *t.trace_speedup, "Trace: divide arrival times by this")
      ->capture_default_str();
  cmd->add_option("--prefix-multiplier", *t.prefix_multiplier,
                  "Trace: scale each 512-token hash block of a Mooncake trace (0.0625: 32-token "
                  "blocks)")
      ->capture_default_str();
  // Bounds and seed.
  cmd->add_option("--max-requests", *t.max_requests, "Requests per level (0: no limit)")
      ->capture_default_str();
  cmd->add_option("--seed", *t.seed,
                  "Seed of every generated text and arrival (and of simulated outputs and "
                  "sampling pickers)")
      ->capture_default_str();
  // Goodput.
  cmd->add_option("--itl-target-tps", *t.itl_targets,
                  "Infera per-user speed targets (tokens/s): a level meets T when its median "
                  "ITL <= 1/T")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--ttft-slo", *t.ttft_slo, "DistServe TTFT target (s)");
  cmd->add_option("--tpot-slo", *t.tpot_slo, "DistServe TPOT target (s)");
  cmd->add_option("--slo-attainment", *t.slo_attainment,
                  "DistServe: fraction of requests that must meet both SLOs")
      ->capture_default_str();
  // Output.
  cmd->add_flag("--no-progress", *t.no_progress, "No progress line on stderr");
  cmd->add_flag("--no-plots", *t.no_plots, "Do not run gnuplot");
}

}  // namespace kvroute::app

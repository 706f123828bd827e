// kvroute sim: flag parsing and process lifecycle (signals, ready line, exit status) around
// sim::SimServer.
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <expected>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "app/commands.h"
#include "common/log.h"
#include "common/stop_signals.h"
#include "engine/profile.h"
#include "sim/sim_config.h"
#include "sim/sim_registration.h"
#include "sim/sim_server.h"
#include "sim/sim_tokenizer.h"

namespace kvroute::app {
namespace {

// --config sim.yaml: a YAML mapping with the flags' long names as keys (underscores or
// dashes). Each value is applied as if given on the command line, except for flags the
// command line set: flags override the file. Unknown keys are an error.
std::expected<void, std::string> ApplyConfigFile(CLI::App& cmd, const std::string& path) {
  std::ifstream file(path);
  if (!file) return std::unexpected("--config: cannot read " + path);
  std::string text{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
  auto values = sim::ReadYamlKeyValues(text);
  if (!values) return std::unexpected("--config " + path + ": " + values.error());
  for (auto& [key, inputs] : *values) {
    CLI::Option* option = cmd.get_option_no_throw("--" + key);
    if (option == nullptr || key == "config" || key == "help") {
      return std::unexpected("--config " + path + ": unknown key '" + key + "'");
    }
    if (option->count() > 0) continue;  // the command line wins
    try {
      option->add_result(inputs.empty() ? std::vector<std::string>{"true"} : inputs);
      option->run_callback();
    } catch (const CLI::Error& e) {
      return std::unexpected("--config " + path + ": '" + key + "': " + e.what());
    }
  }
  return {};
}

int RunSim(sim::SimConfig config, const sim::SimEtcdOptions& etcd_options) {
  if (!InitLogging(config.log_level, "sim")) {
    std::cerr << "kvroute sim: unknown --log-level '" << config.log_level << "'\n";
    return 2;
  }
  // Before any thread starts, so every thread inherits the blocked mask.
  StopSignals signals;

  auto tokenizer = sim::LoadSimTokenizer(config.tokenizer);
  if (!tokenizer) {
    std::cerr << "kvroute sim: " << tokenizer.error() << "\n";
    return 2;
  }
  auto server = sim::SimServer::Create(config, std::move(*tokenizer));
  if (!server) {
    std::cerr << "kvroute sim: " << server.error() << "\n";
    return 2;
  }
  if (auto ok = (*server)->Start(); !ok) {
    std::cerr << "kvroute sim: " << ok.error() << "\n";
    return 2;
  }
  // --etcd: registered once listening; on SIGTERM draining first, then stop (sim_registration.h).
  std::unique_ptr<sim::SimRegistrar> registrar;
  if (!etcd_options.endpoints.empty()) {
    auto profile = engine::LoadProfile(config.profile);
    auto r = sim::SimRegistrar::Create(
        etcd_options, sim::SimWorkerRecord(config, **server, etcd_options,
                                           profile ? profile->hardware.num_gpus : 1));
    if (!r) {
      std::cerr << "kvroute sim: " << r.error() << "\n";
      return 2;
    }
    registrar = std::move(*r);
    registrar->Start();
  }

  std::string host =
      config.host.find(':') != std::string::npos ? "[" + config.host + "]" : config.host;
  // The ready line: tests and scripts read the address from it.
  std::cout << "kvroute sim listening on http://" << host << ":" << (*server)->port()
            << " model=" << (*server)->served_model_name() << " kv_events="
            << ((*server)->kv_events_endpoint().empty() ? "off" : (*server)->kv_events_endpoint())
            << ((*server)->kv_events_replay_endpoint().empty()
                    ? ""
                    : " kv_replay=" + (*server)->kv_events_replay_endpoint())
            << ((*server)->kv_engine_id().empty() ? "" : " kv_engine_id=" + (*server)->kv_engine_id())
            << ((*server)->kv_side_channel().empty()
                    ? ""
                    : " kv_side_channel=" + (*server)->kv_side_channel())
            << std::endl;

  const int signal_number = signals.Wait();
  auto grace = std::chrono::milliseconds(static_cast<long long>(config.shutdown_timeout_s * 1000));
  std::cerr << "kvroute sim: signal " << signal_number << ", draining for up to "
            << config.shutdown_timeout_s << " s" << std::endl;
  if (registrar) registrar->SetDraining();
  std::size_t cut = (*server)->Shutdown(grace);
  if (registrar) registrar->Stop();
  std::cerr << "kvroute sim: stopped (" << cut << " request(s) aborted at the deadline)"
            << std::endl;
  return 0;
}

}  // namespace

void RegisterSimCommand(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand(
      "sim",
      "Run one simulated vLLM model server: OpenAI API (SSE), /metrics, /tokenize, KV events "
      "over ZMQ, driven by an engine model in sped-up real time. Debug (kvroute only): GET "
      "/debug/kv_cache lists the engine's cached block hashes per tier.");
  auto c = std::make_shared<sim::SimConfig>();
  // vLLM's NIXL environment variables are the defaults of the matching flags.
  const sim::NixlEnvDefaults nixl_env = sim::ReadNixlEnv();
  c->kv_side_channel_host = nixl_env.side_channel_host;
  c->kv_side_channel_port = nixl_env.side_channel_port;
  c->nixl_abort_request_timeout_s = nixl_env.abort_request_timeout_s;
  auto kv_transfer_json = std::make_shared<std::string>();
  auto kv_events_json = std::make_shared<std::string>();
  auto no_kv_events = std::make_shared<bool>(false);
  auto config_path = std::make_shared<std::string>();
  cmd->add_option("--config", *config_path,
                  "YAML file with the same keys as the flags; flags override it");

  cmd->add_option("--host", c->host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", c->port, "HTTP port; 0 picks a free one (printed when ready)")
      ->capture_default_str();
  cmd->add_option("--http-threads", c->http_threads, "HTTP I/O threads")->capture_default_str();
  cmd->add_option("--served-model-name", c->served_model_name,
                  "Model name clients must send (default: the profile's)");
  cmd->add_option("--lora-modules", c->lora_modules,
                  "LoRA adapters served besides the base model, as vLLM's NAME=PATH (or NAME); "
                  "a request naming one runs with it (its name enters every block's hash)");
  cmd->add_option("--shutdown-timeout", c->shutdown_timeout_s,
                  "Seconds in-flight requests may run after SIGTERM/SIGINT; 0 aborts them")
      ->capture_default_str();
  cmd->add_option("--profile", c->profile,
                  "Model x hardware profile: embedded name or path to a .yaml")
      ->capture_default_str();
  cmd->add_option("--block-size", c->block_size, "Tokens per KV block")->capture_default_str();
  cmd->add_option("--max-num-seqs", c->max_num_seqs, "Requests in one batch")
      ->capture_default_str();
  cmd->add_option("--max-num-batched-tokens", c->max_num_batched_tokens,
                  "Tokens (prefill + decode) in one engine step")
      ->capture_default_str();
  cmd->add_option("--num-gpu-blocks", c->num_gpu_blocks,
                  "KV blocks on the GPU; 0 derives them from the profile")
      ->capture_default_str();
  cmd->add_option("--num-cpu-blocks", c->num_cpu_blocks, "KV blocks of the CPU tier; 0 = none")
      ->capture_default_str();
  cmd->add_option("--num-disk-blocks", c->num_disk_blocks,
                  "KV blocks of the local disk tier (below the CPU tier); 0 = none")
      ->capture_default_str();
  cmd->add_flag("--async-tier-loads", c->async_tier_loads,
               "Load lower-tier (CPU, disk, store) hits aside while the batch runs, as vLLM's "
               "offloading connector does, instead of making the step wait for them");
  cmd->add_option("--disk-read-bandwidth", c->disk_read_bandwidth,
                  "Disk tier read bytes/s; 0 = the engine model's 6.5e9 (PCIe 4 NVMe)");
  cmd->add_option("--disk-write-bandwidth", c->disk_write_bandwidth,
                  "Disk tier write bytes/s (offloads queued past 1 s are dropped); 0 = 3.5e9");
  cmd->add_option("--disk-latency", c->disk_latency_s,
                  "Seconds per disk load; negative = the engine model's 100e-6");
  cmd->add_option("--kv-store", c->kv_store,
                  "HOST:PORT of a `kvroute store`: the cluster's shared KV tier (every computed "
                  "block is written through; a prefix no local tier holds is looked up there)");
  cmd->add_option("--kv-store-bandwidth", c->kv_store_bandwidth,
                  "Bytes/s loading from the store; 0 = the engine model's 12.5e9 (100 Gb/s)");
  cmd->add_option("--kv-store-latency", c->kv_store_latency_s,
                  "Seconds per store load; negative = the engine model's 1e-3");
  cmd->add_option("--kv-store-lease-renew", c->kv_store_lease_renew_s,
                  "Seconds (simulated) after which a queued request renews its store lease; keep "
                  "it under the store's --lease-ttl. Negative = 20 (a third of the store's "
                  "default 60), 0 = never");
  cmd->add_option("--max-model-len", c->max_model_len, "Context length; 0 = the profile's")
      ->capture_default_str();
  cmd->add_option("--seed", c->seed, "Output seed for requests without one")->capture_default_str();
  cmd->add_option("--speedup", c->speedup,
                  "Simulated time runs this many times faster than real time")
      ->capture_default_str();
  cmd->add_option("--kv-events-endpoint", c->kv_events_endpoint,
                  "ZMQ PUB endpoint; bound if it has '*' or '::' (vLLM's rule), else connected")
      ->capture_default_str();
  cmd->add_option("--kv-events-topic", c->kv_events_topic, "First frame of every KV message");
  cmd->add_option("--kv-events-replay-endpoint", c->kv_events_replay_endpoint,
                  "ZMQ ROUTER endpoint for replay (always bound); empty = none");
  cmd->add_option("--kv-events-encoding", c->kv_events_encoding,
                  "Event layout: map (vLLM main) or array (older vLLM)")
      ->capture_default_str()
      ->check(CLI::IsMember({"map", "array"}));
  cmd->add_option("--kv-events-buffer-steps", c->kv_events_buffer_steps, "Batches kept for replay")
      ->capture_default_str();
  cmd->add_flag("--no-kv-events", *no_kv_events, "Do not publish KV events");
  cmd->add_option("--kv-events-drop-every", c->kv_events_drop_every,
                  "TEST ONLY: every Nth batch is kept for replay but not sent, so subscribers "
                  "must repair gaps; 0 = off")
      ->capture_default_str();
  cmd->add_option("--kv-events-config", *kv_events_json,
                  "vLLM's KV events JSON (enable_kv_cache_events, publisher, endpoint, "
                  "replay_endpoint, topic, buffer_steps); overrides the --kv-events-* flags");
  cmd->add_option("--kv-transfer-config", *kv_transfer_json,
                  "vLLM's KV transfer JSON, e.g. "
                  "'{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}': P/D "
                  "prefill legs (do_remote_decode) and decode legs (do_remote_prefill)");
  cmd->add_option("--kv-side-channel-host", c->kv_side_channel_host,
                  "P/D side channel host, bound and advertised as remote_host "
                  "(default: $VLLM_NIXL_SIDE_CHANNEL_HOST or localhost)")
      ->capture_default_str();
  cmd->add_option("--kv-side-channel-port", c->kv_side_channel_port,
                  "P/D side channel port, advertised as remote_port; 0 picks a free one "
                  "(default: $VLLM_NIXL_SIDE_CHANNEL_PORT or 5600)")
      ->capture_default_str();
  cmd->add_option("--nixl-abort-request-timeout", c->nixl_abort_request_timeout_s,
                  "Simulated seconds a finished prefill's KV stays pinned for its decoder "
                  "(default: $VLLM_NIXL_ABORT_REQUEST_TIMEOUT or 480)")
      ->capture_default_str();
  cmd->add_option("--kv-link", c->kv_link,
                  "The profile's link (its 'links' list) decode legs pull KV over; empty = "
                  "the first. With --etcd, the record's 'link'");
  cmd->add_option("--tokenizer", c->tokenizer,
                  "Model directory (tokenizer.json + tokenizer_config.json) or shipped model "
                  "name (qwen3, llama3_1, deepseek_v3) for /tokenize, chat templates and output "
                  "text; empty = the built-in simple tokenizer");
  cmd->add_option("--image-placeholder", c->image_placeholder,
                  "Text standing for one image_url part in chat content")
      ->capture_default_str();
  cmd->add_option("--image-tokens", c->image_tokens,
                  "Prompt tokens one image occupies (prefilled, keyed with the image's id); "
                  "0 = the --tokenizer directory's config.json, else 64")
      ->capture_default_str();
  cmd->add_option("--image-token-id", c->image_token_id,
                  "Token id of image placeholder tokens; -1 = config.json, else the "
                  "placeholder's last token")
      ->capture_default_str();
  cmd->add_option("--log-level", c->log_level, "trace|debug|info|warn|error|off")
      ->capture_default_str();
  auto etcd = std::make_shared<sim::SimEtcdOptions>();
  cmd->add_option("--etcd", etcd->endpoints,
                  "Register in etcd (comma-separated client URLs, e.g. http://127.0.0.1:2379) "
                  "under --etcd-prefix with a lease kept alive; on SIGTERM set draining first "
                  "(docs/etcd.md)");
  cmd->add_option("--etcd-prefix", etcd->prefix, "Key prefix; the key is prefix + name")
      ->capture_default_str();
  cmd->add_option("--etcd-ttl", etcd->ttl_s,
                  "Lease TTL, seconds (>= 2): a killed sim leaves the fleet after it")
      ->capture_default_str();
  cmd->add_option("--etcd-name", etcd->name, "Worker name in the record (default sim-<port>)");
  cmd->add_option("--etcd-advertise-url", etcd->advertise_url,
                  "URL routers use (default http://<host>:<port>, 127.0.0.1 for 0.0.0.0)");
  cmd->add_option("--etcd-drain-delay", etcd->drain_delay_s,
                  "Seconds between draining: true and refusing new connections on SIGTERM")
      ->capture_default_str();
  cmd->footer("Embedded profiles: " + [] {
    std::string names;
    for (const auto& n : engine::ListProfiles()) names += (names.empty() ? "" : ", ") + n;
    return names;
  }());

  cmd->callback([cmd, c, etcd, no_kv_events, config_path, kv_events_json, kv_transfer_json, exit_code] {
    if (!config_path->empty()) {
      if (auto ok = ApplyConfigFile(*cmd, *config_path); !ok) {
        std::cerr << "kvroute sim: " << ok.error() << "\n";
        *exit_code = 2;
        return;
      }
    }
    sim::SimConfig config = *c;
    if (*no_kv_events) config.kv_events = false;
    if (!kv_events_json->empty()) {
      auto events = sim::ParseKvEventsConfig(
          *kv_events_json, sim::KvEventsSettings{.enabled = config.kv_events,
                                                 .endpoint = config.kv_events_endpoint,
                                                 .replay_endpoint = config.kv_events_replay_endpoint,
                                                 .topic = config.kv_events_topic,
                                                 .buffer_steps = config.kv_events_buffer_steps});
      if (!events) {
        std::cerr << "kvroute sim: " << events.error() << "\n";
        *exit_code = 2;
        return;
      }
      config.kv_events = events->enabled;
      config.kv_events_endpoint = events->endpoint;
      config.kv_events_replay_endpoint = events->replay_endpoint;
      config.kv_events_topic = events->topic;
      config.kv_events_buffer_steps = events->buffer_steps;
    }
    if (!kv_transfer_json->empty()) {
      auto kt = sim::ParseKvTransferConfig(*kv_transfer_json);
      if (!kt) {
        std::cerr << "kvroute sim: " << kt.error() << "\n";
        *exit_code = 2;
        return;
      }
      config.kv_transfer = *kt;
    }
    if (auto ok = sim::Validate(config); !ok) {
      std::cerr << "kvroute sim: " << ok.error() << "\n";
      *exit_code = 2;
      return;
    }
    *exit_code = RunSim(std::move(config), *etcd);
  });
}

}  // namespace kvroute::app

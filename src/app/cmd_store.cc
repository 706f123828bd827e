// kvroute store: flag parsing and process lifecycle (signals, ready line) around
// store::StoreServer, the cluster's shared KV tier (src/store/README.md).
#include <chrono>
#include <iostream>
#include <memory>
#include <string>

#include "app/commands.h"
#include "common/log.h"
#include "common/stop_signals.h"
#include "store/store_server.h"

namespace kvroute::app {

void RegisterStoreCommand(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand(
      "store",
      "Run the cluster's shared KV store: the metadata of the shared tier (block hashes, "
      "sizes, last use) with an LRU capacity and an idle TTL, a match/put/lease HTTP API "
      "for `kvroute sim --kv-store`, and its own KV events (medium SHARED) over ZMQ with replay, "
      "which `kvroute serve` indexes once for every worker.");
  auto o = std::make_shared<store::StoreServerOptions>();
  auto capacity_gb = std::make_shared<double>(64);
  auto ttl_s = std::make_shared<double>(0);
  auto lease_ttl_s = std::make_shared<double>(60);
  auto log_level = std::make_shared<std::string>("info");
  cmd->add_option("--host", o->host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", o->port, "HTTP port; 0 picks a free one (printed when ready)")
      ->capture_default_str();
  cmd->add_option("--capacity-gb", *capacity_gb,
                  "Capacity in GB (1e9 bytes) of modelled KV; the least recently used blocks "
                  "are deleted past it")
      ->capture_default_str();
  cmd->add_option("--ttl", *ttl_s, "Seconds a block may stay unused before it is deleted; 0 = never")
      ->capture_default_str();
  cmd->add_option("--lease-ttl", *lease_ttl_s,
                  "Seconds a lease (a sim's hold on a queued request's prefix, released when "
                  "the request is scheduled) lasts if never released; > 0")
      ->capture_default_str();
  cmd->add_option("--block-size", o->store.block_size, "Tokens per KV block (the sims' own)")
      ->capture_default_str();
  cmd->add_option("--kv-events-endpoint", o->kv_events_endpoint,
                  "ZMQ PUB endpoint of the store's KV events; bound if it has '*' or '::'")
      ->capture_default_str();
  cmd->add_option("--kv-events-replay-endpoint", o->kv_events_replay_endpoint,
                  "ZMQ ROUTER endpoint for replay (always bound); empty = none");
  cmd->add_option("--log-level", *log_level, "trace, debug, info, warn, error")
      ->capture_default_str();
  cmd->callback([o, capacity_gb, ttl_s, lease_ttl_s, log_level, exit_code] {
    if (!InitLogging(*log_level, "store")) {
      std::cerr << "kvroute store: unknown --log-level '" << *log_level << "'\n";
      *exit_code = 2;
      return;
    }
    if (!(*ttl_s >= 0)) {
      std::cerr << "kvroute store: --ttl must be >= 0\n";
      *exit_code = 2;
      return;
    }
    if (!(*lease_ttl_s > 0)) {
      std::cerr << "kvroute store: --lease-ttl must be > 0\n";
      *exit_code = 2;
      return;
    }
    o->store.capacity_bytes = *capacity_gb * 1e9;
    o->store.lease_ttl = FromSeconds(*lease_ttl_s);
    o->store.ttl = FromSeconds(*ttl_s);
    StopSignals signals;
    auto server = store::StoreServer::Start(*o);
    if (!server) {
      std::cerr << "kvroute store: " << server.error() << "\n";
      *exit_code = 2;
      return;
    }
    // The ready line: tests and scripts read the addresses from it.
    std::cout << "kvroute store listening on http://" << o->host << ":" << (*server)->port()
              << " kv_events=" << (*server)->events_endpoint()
              << ((*server)->replay_endpoint().empty()
                      ? ""
                      : " kv_replay=" + (*server)->replay_endpoint())
              << std::endl;
    const int signal_number = signals.Wait();
    std::cerr << "kvroute store: signal " << signal_number << ", stopping" << std::endl;
    (*server)->Shutdown();
    *exit_code = 0;
  });
}

}  // namespace kvroute::app

// WorkerRecord: what a model server registers about itself in etcd (the value of its key
// under the prefix), kvroute's own JSON format, documented field by field in docs/etcd.md so a
// launcher can register a real vLLM server with curl. `kvroute sim --etcd` writes it;
// `kvroute serve --etcd` reads it.
//
// Unknown fields are ignored (a newer writer may add some); a missing required field or a
// field of the wrong type makes the record malformed (the reader skips it and names the key).
//
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvroute::etcd {

inline constexpr std::string_view kDefaultWorkerPrefix = "/kvroute/workers/";

struct WorkerRecord {
  std::string name;                 // required; unique in the fleet
  std::string url;                  // required; "http://host:port" of the OpenAI API
  std::vector<std::string> models;  // required, non-empty: served model names
  std::string role = "mixed";       // mixed | prefill | decode
  std::uint32_t tp = 0;             // tensor-parallel size, >= 1; 0: not said (the profile's GPUs)
  std::uint32_t gpus = 0;           // GPUs the server uses, >= tp; 0: not said (tp)
  std::uint32_t block_size = 0;     // KV block size in tokens; 0: not said
  std::string kv_events_endpoint;   // vLLM kv_events_config.endpoint; empty: no events
  std::string kv_events_replay_endpoint;
  std::string kv_events_topic;
  std::string profile;              // kvroute engine profile; empty: the default
  double profile_speedup = 1;       // > 0; `kvroute sim --speedup`
  bool draining = false;            // true: send no new requests
  // P/D: the link remote KV arrives over when this server decodes a split request (one of
  // the profile's `links` by name; empty: the profile's first), and figures that replace the
  // link's: bandwidth per lane (> 0, bytes/s) and latency (>= 0, s). The same as a static
  // worker's `link`, `link_bytes_per_s`, `link_latency_s` (docs/pd.md).
  std::string link;
  std::optional<double> link_bytes_per_s;
  std::optional<double> link_latency_s;
  bool operator==(const WorkerRecord&) const = default;
};

std::string ToJson(const WorkerRecord& record);
// Errors name the field: "models: must be a non-empty array of strings".
std::expected<WorkerRecord, std::string> ParseWorkerRecord(std::string_view json);

}  // namespace kvroute::etcd

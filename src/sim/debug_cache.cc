#include "sim/debug_cache.h"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

namespace kvroute::sim {

std::string KvCacheDebugJson(const CacheContents& contents, const engine::EngineConfig& config,
                             const kv::ZmqPublisherStats* publisher) {
  boost::json::object out;
  out["block_size"] = config.block_size;
  out["hash_algo"] =
      config.event_hash == engine::EventHash::kVllmSha256Cbor ? "sha256_cbor" : "block_key";
  out["python_hash_seed"] = config.python_hash_seed;
  out["num_running"] = contents.stats.num_running;
  out["num_waiting"] = contents.stats.num_waiting;
  if (publisher != nullptr) {
    out["kv_events"] = boost::json::object{{"published", publisher->published},
                                           {"dropped_queue_full", publisher->dropped_queue_full}};
  } else {
    out["kv_events"] = nullptr;
  }
  boost::json::object tiers;
  for (int t = 0; t < kv::kNumTiers; ++t) {
    boost::json::array hashes;
    hashes.reserve(contents.tiers[t].size());
    for (kv::EngineHash h : contents.tiers[t]) hashes.emplace_back(h);  // stays uint64
    tiers[kv::TierName(static_cast<kv::Tier>(t))] = std::move(hashes);
  }
  out["tiers"] = std::move(tiers);
  return boost::json::serialize(out);
}

}  // namespace kvroute::sim

// NewEngine: resolves an EngineConfig against a Profile and wraps the Scheduler.
#include "engine/engine.h"

#include <algorithm>

#include "engine/scheduler.h"
#include "engine/step_time.h"

namespace kvroute::engine {
namespace {

class EngineImpl final : public Engine {
 public:
  EngineImpl(const Profile& profile, const EngineConfig& config, std::int64_t num_gpu_blocks)
      : profile_(profile), config_(config), scheduler_(profile_, config_, num_gpu_blocks) {}

  std::optional<std::string> Add(RequestSpec spec) override {
    return scheduler_.Add(std::move(spec));
  }
  void Abort(const std::string& request_id) override { scheduler_.Abort(request_id); }
  bool HasWork() const override { return scheduler_.HasWork(); }
  StepResult Step(Nanos now) override {
    StepResult r;
    scheduler_.Step(now, &r);
    return r;
  }
  void StepInto(Nanos now, StepResult* out) override { scheduler_.Step(now, out); }
  EngineStats Stats() const override { return scheduler_.Stats(); }
  const EngineConfig& config() const override { return config_; }
  const Profile& profile() const override { return profile_; }
  bool ResetPrefixCache() override { return scheduler_.ResetPrefixCache(); }
  std::vector<kv::EngineHash> CachedBlockHashes(kv::Tier tier) const override {
    return scheduler_.CachedBlockHashes(tier);
  }
  std::optional<PinnedKv> FindPinned(const std::string& request_id) const override {
    return scheduler_.FindPinned(request_id);
  }
  bool ReleasePinned(const std::string& request_id) override {
    return scheduler_.ReleasePinned(request_id);
  }
  std::optional<Nanos> NextTimedEvent() const override { return scheduler_.NextTimedEvent(); }

 private:
  Profile profile_;
  EngineConfig config_;
  Scheduler scheduler_;
};

}  // namespace

void StepResult::Clear() {
  duration = Nanos(0);
  tokens.clear();
  finished_without_token.clear();
  kv_events.clear();
  num_prefill_tokens = 0;
  num_decode_tokens = 0;
  kv_transfers_done.clear();
  pins_expired.clear();
}

std::vector<TokenId> DefaultOutputVocabulary() {
  std::vector<TokenId> ids(1000);
  for (TokenId i = 0; i < 1000; ++i) ids[i] = 1000 + i;
  return ids;
}

EngineConfig ResolveConfig(const Profile& profile, EngineConfig config) {
  if (config.block_size == 0) config.block_size = kv::kDefaultBlockSize;
  if (config.max_num_seqs == 0) config.max_num_seqs = 1;
  if (config.max_num_batched_tokens == 0) config.max_num_batched_tokens = 1;
  if (config.max_model_len == 0) config.max_model_len = profile.max_model_len;
  if (config.num_cpu_blocks < 0) config.num_cpu_blocks = 0;
  if (config.cpu_to_gpu_bandwidth_bytes_per_s <= 0) config.cpu_to_gpu_bandwidth_bytes_per_s = 25e9;
  const EngineConfig defaults;
  if (config.disk.num_blocks < 0) config.disk.num_blocks = 0;
  if (!(config.disk.read_bytes_per_s > 0)) config.disk.read_bytes_per_s = defaults.disk.read_bytes_per_s;
  if (!(config.disk.write_bytes_per_s > 0)) config.disk.write_bytes_per_s = defaults.disk.write_bytes_per_s;
  if (!(config.disk.latency_s >= 0)) config.disk.latency_s = defaults.disk.latency_s;
  if (!(config.shared.read_bytes_per_s > 0)) config.shared.read_bytes_per_s = defaults.shared.read_bytes_per_s;
  if (!(config.shared.latency_s >= 0)) config.shared.latency_s = defaults.shared.latency_s;
  if (config.output_vocabulary.empty()) config.output_vocabulary = DefaultOutputVocabulary();
  if (!(config.kv_link.bandwidth_bytes_per_s > 0)) {
    if (const LinkSpec* link = profile.FindLink(config.kv_link.name)) config.kv_link = *link;
  }
  if (config.pinned_kv_timeout < Nanos(0)) config.pinned_kv_timeout = Nanos(0);
  if (config.num_gpu_blocks_override <= 0) {
    config.num_gpu_blocks_override = StepTimeModel(profile).NumGpuBlocks(config.block_size);
  }
  return config;
}

std::unique_ptr<Engine> NewEngine(const Profile& profile, const EngineConfig& config) {
  const EngineConfig resolved = ResolveConfig(profile, config);
  return std::make_unique<EngineImpl>(profile, resolved, resolved.num_gpu_blocks_override);
}

}  // namespace kvroute::engine

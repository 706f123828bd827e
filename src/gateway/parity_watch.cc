#include "gateway/parity_watch.h"

#include <spdlog/spdlog.h>

namespace kvroute::gateway {

void ParityWatch::Set(WorkerId worker, std::string_view name, std::string_view setting,
                      bool mismatch) {
  metrics_->SetParityMismatch(name, setting, mismatch);
  std::lock_guard lock(mu_);
  if (mismatch) {
    mismatches_.emplace(worker, std::string(setting));
  } else {
    mismatches_.erase({worker, std::string(setting)});
  }
}

bool ParityWatch::Has(WorkerId worker, std::string_view setting) const {
  std::lock_guard lock(mu_);
  return mismatches_.contains({worker, std::string(setting)});
}

bool ParityWatch::Probed(WorkerId worker) const {
  std::lock_guard lock(mu_);
  return probed_.contains(worker);
}

std::vector<ProbeFinding> ParityWatch::RunStartProbe(const std::vector<ParityTarget>& targets,
                                                     const ParityProbeDeps& deps) {
  {
    std::lock_guard lock(mu_);
    for (const auto& t : targets) probed_.insert(t.id);
  }
  for (const auto& t : targets) {
    for (std::string_view setting : kParitySettings) Set(t.id, t.name, setting, false);
  }
  std::vector<ProbeFinding> findings = ProbeWorkers(targets, deps);
  for (const ProbeFinding& f : findings) {
    spdlog::warn("parity: {}", f.message);
    for (const auto& t : targets) {
      if (t.id == f.worker) Set(f.worker, t.name, f.setting, true);
    }
  }
  // The agreeing workers by name (the first few), so a join's probe can be told from another.
  std::string agreeing;
  std::size_t agree = 0;
  for (const auto& t : targets) {
    bool found = false;
    for (const ProbeFinding& f : findings) found = found || f.worker == t.id;
    if (found) continue;
    if (++agree <= 8) agreeing += (agreeing.empty() ? "" : ", ") + t.name;
  }
  if (agree > 8) agreeing += ", …";
  if (agree > 0) {
    spdlog::info("parity: {} of {} probed worker(s) key blocks as kvroute does (block size {}): {}",
                 agree, targets.size(), deps.block_size, agreeing);
  }
  return findings;
}

void ParityWatch::WatchBlockSize(WorkerId worker, std::string_view name, std::uint32_t scraped,
                                 std::uint32_t ours) {
  if (scraped == 0) return;
  const bool differs = scraped != ours;
  if (differs == Has(worker, "block_size")) return;
  if (differs) {
    spdlog::warn(
        "parity: worker {}: block_size mismatch: cache_config_info says {}, kvroute "
        "keys blocks of {} tokens; set block_size to the engines' value",
        name, scraped, ours);
  } else {
    spdlog::info("parity: worker {}: block_size agrees again ({})", name, ours);
  }
  Set(worker, name, "block_size", differs);
}

}  // namespace kvroute::gateway

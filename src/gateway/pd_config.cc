#include "gateway/pd_config.h"

#include <cmath>

#include <yaml-cpp/yaml.h>

#include "fleet/worker_spec.h"
#include "sched/pd_decision.h"
#include "gateway/config_reader.h"

namespace kvroute::gateway {

using config_detail::Error;
using config_detail::MapReader;

std::expected<void, std::string> ParseWorkerPd(MapReader& r, WorkerPdConfig* w) {
  KVROUTE_TRY(r.Number("tp", &w->tp, 0, 1024));
  KVROUTE_TRY(r.Number("gpus", &w->gpus, 0, 1024));
  KVROUTE_TRY(r.String("link", &w->link));
  // Optional numbers: present means "replace the profile's figure".
  if (YAML::Node n = r.Get("link_bytes_per_s"); n && !n.IsNull()) {
    double v = 0;
    KVROUTE_TRY(r.Number("link_bytes_per_s", &v, 1, 1e15));
    w->link_bytes_per_s = v;
  }
  if (YAML::Node n = r.Get("link_latency_s"); n && !n.IsNull()) {
    double v = 0;
    KVROUTE_TRY(r.Number("link_latency_s", &v, 0, 60));
    w->link_latency_s = v;
  }
  return {};
}

std::expected<void, std::string> ParsePdSection(const YAML::Node& node, PdConfig* pd) {
  MapReader r(node, "pd");
  KVROUTE_TRY(r.CheckIsMap());
  KVROUTE_TRY(r.String("mode", &pd->mode));
  KVROUTE_TRY(r.String("rule", &pd->rule));
  KVROUTE_TRY(r.Number("token_cap", &pd->token_cap, 0, 1e12));
  KVROUTE_TRY(r.Number("non_cached_tokens", &pd->non_cached_tokens, 0, 1e12));
  KVROUTE_TRY(r.Number("stall", &pd->stall, 0, 1e3));
  KVROUTE_TRY(r.Number("itl_slo_s", &pd->itl_slo_s, 0, 3600));
  KVROUTE_TRY(r.Number("queue_behind", &pd->queue_behind, 0, 1e3));
  KVROUTE_TRY(r.Number("chunk_stall", &pd->chunk_stall, 0, 1e3));
  KVROUTE_TRY(r.Number("chunk_tokens", &pd->chunk_tokens, 1, 1e7));
  KVROUTE_TRY(r.Number("prefill_timeout_ms", &pd->prefill_timeout_ms, 0, 3.6e6));
  return r.RejectUnknown();
}

std::expected<void, std::string> ValidateWorkerPd(const WorkerPdConfig& w,
                                                  const std::string& path) {
  if (w.gpus != 0 && w.tp != 0 && w.gpus < w.tp) {
    return Error(path + ".gpus: " + std::to_string(w.gpus) + " is fewer than tp (" +
                 std::to_string(w.tp) + ")");
  }
  return {};
}

std::expected<void, std::string> ValidatePd(const PdConfig& pd) {
  if (pd.mode != "auto" && pd.mode != "on" && pd.mode != "off") {
    return Error("pd.mode: '" + pd.mode + "' is not one of auto, on, off");
  }
  if (!sched::ParsePdRule(pd.rule)) {
    return Error("pd.rule: '" + pd.rule + "' is not one of cost, dynamo_token_cap, llmd_non_cached");
  }
  if (!(pd.stall >= 0)) return Error("pd.stall: must be >= 0");
  // The reader refuses non-numbers and negatives; this guards values set in code.
  if (!std::isfinite(pd.queue_behind) || pd.queue_behind < 0) {
    return Error("pd.queue_behind: must be a finite number >= 0");
  }
  return {};
}

void EmitWorkerPd(const WorkerPdConfig& w, YAML::Emitter& out) {
  out << YAML::Key << "tp" << YAML::Value << w.tp;
  out << YAML::Key << "gpus" << YAML::Value << w.gpus;
  out << YAML::Key << "link" << YAML::Value << w.link;
  // Absent figures stay absent (the profile's apply): printing 0 would re-parse differently.
  if (w.link_bytes_per_s) {
    out << YAML::Key << "link_bytes_per_s" << YAML::Value << YAML::DoublePrecision(15)
        << *w.link_bytes_per_s;
  }
  if (w.link_latency_s) {
    out << YAML::Key << "link_latency_s" << YAML::Value << YAML::DoublePrecision(15)
        << *w.link_latency_s;
  }
}

void EmitPd(const PdConfig& pd, YAML::Emitter& out) {
  out << YAML::Key << "pd" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "mode" << YAML::Value << pd.mode;
  out << YAML::Key << "rule" << YAML::Value << pd.rule;
  out << YAML::Key << "token_cap" << YAML::Value << pd.token_cap;
  out << YAML::Key << "non_cached_tokens" << YAML::Value << pd.non_cached_tokens;
  // 15 digits: 0.1 prints as 0.1 (yaml-cpp's default, 17, shows the binary's tail).
  out << YAML::Key << "stall" << YAML::Value << YAML::DoublePrecision(15) << pd.stall;
  out << YAML::Key << "itl_slo_s" << YAML::Value << YAML::DoublePrecision(15) << pd.itl_slo_s;
  out << YAML::Key << "queue_behind" << YAML::Value << YAML::DoublePrecision(15)
      << pd.queue_behind;
  out << YAML::Key << "chunk_stall" << YAML::Value << YAML::DoublePrecision(15)
      << pd.chunk_stall;
  out << YAML::Key << "chunk_tokens" << YAML::Value << pd.chunk_tokens;
  out << YAML::Key << "prefill_timeout_ms" << YAML::Value << pd.prefill_timeout_ms;
  out << YAML::EndMap;
}

sched::PdOptions PdOptionsOf(const PdConfig& pd) {
  sched::PdOptions o;
  o.rule = sched::ParsePdRule(pd.rule).value_or(sched::PdRule::kCost);
  o.token_cap = pd.token_cap;
  o.non_cached_tokens = pd.non_cached_tokens;
  o.slowdown.stall = pd.stall;
  o.queue_behind = pd.queue_behind;
  o.chunk_stall = pd.chunk_stall;
  o.slowdown.chunk_tokens = pd.chunk_tokens;
  if (pd.itl_slo_s > 0) o.itl_slo_s = pd.itl_slo_s;
  return o;
}

void ApplyWorkerPd(const WorkerPdConfig& w, fleet::WorkerSpec* spec) {
  spec->tp = w.tp;
  spec->gpus = w.gpus;
  spec->link = w.link;
  spec->link_bytes_per_s = w.link_bytes_per_s;
  spec->link_latency_s = w.link_latency_s;
}

}  // namespace kvroute::gateway

#include "engine/profile.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "engine/embedded_profiles.h"

namespace kvroute::engine {
namespace {

// yaml-cpp reports errors by throwing; profile loading happens at start-up, never on a request
// path, so exceptions are caught here and turned into messages.
class Reader {
 public:
  Reader(const YAML::Node& node, std::string where) : node_(node), where_(std::move(where)) {}

  template <typename T>
  void Required(const char* key, T* out) {
    if (!error_.empty()) return;
    const YAML::Node v = node_[key];
    if (!v) {
      error_ = where_ + ": missing '" + key + "'";
      return;
    }
    Convert(v, key, out);
  }
  template <typename T>
  void Optional(const char* key, T* out) {
    if (!error_.empty()) return;
    const YAML::Node v = node_[key];
    if (v) Convert(v, key, out);
  }
  const std::string& error() const { return error_; }
  void Fail(const std::string& what) {
    if (error_.empty()) error_ = where_ + ": " + what;
  }

 private:
  template <typename T>
  void Convert(const YAML::Node& v, const char* key, T* out) {
    try {
      *out = v.as<T>();
    } catch (const YAML::Exception& e) {
      error_ = where_ + ": bad value for '" + key + "': " + e.what();
    }
  }

  YAML::Node node_;
  std::string where_;
  std::string error_;
};

std::expected<AnchorMetric, std::string> ParseMetric(const std::string& s) {
  if (s == "prefill_tokens_per_s") return AnchorMetric::kPrefillTokensPerS;
  if (s == "decode_step_s") return AnchorMetric::kDecodeStepS;
  if (s == "decode_tokens_per_s") return AnchorMetric::kDecodeTokensPerS;
  return std::unexpected("unknown anchor metric '" + s + "'");
}

std::string ReadModel(const YAML::Node& n, const std::string& where, ModelSpec* m) {
  if (!n || !n.IsMap()) return where + ": missing 'model' section";
  Reader r(n, where + ".model");
  r.Required("source", &m->source);
  r.Required("hf_name", &m->hf_name);
  r.Required("num_layers", &m->num_layers);
  r.Required("hidden_size", &m->hidden_size);
  r.Required("num_attention_heads", &m->num_attention_heads);
  r.Required("num_kv_heads", &m->num_kv_heads);
  r.Required("head_dim", &m->head_dim);
  r.Optional("vocab_size", &m->vocab_size);
  r.Required("total_params", &m->total_params);
  r.Required("active_params", &m->active_params);
  r.Required("weight_bytes_per_param", &m->weight_bytes_per_param);
  r.Required("kv_bytes_per_element", &m->kv_bytes_per_element);
  r.Optional("mla", &m->mla);
  r.Optional("num_experts", &m->num_experts);
  r.Optional("experts_per_token", &m->experts_per_token);
  r.Optional("expert_params", &m->expert_params);
  if (m->mla) {
    r.Required("kv_lora_rank", &m->kv_lora_rank);
    r.Required("qk_rope_head_dim", &m->qk_rope_head_dim);
    r.Required("qk_nope_head_dim", &m->qk_nope_head_dim);
  }
  if (r.error().empty()) {
    if (m->num_layers == 0 || m->num_attention_heads == 0 || m->head_dim == 0 ||
        (!m->mla && m->num_kv_heads == 0) || (m->mla && m->kv_lora_rank == 0)) {
      r.Fail("layer, head and KV dimensions must be positive");
    } else if (m->total_params <= 0 || m->active_params <= 0 ||
               m->active_params > m->total_params) {
      r.Fail("need 0 < active_params <= total_params");
    } else if (m->weight_bytes_per_param <= 0 || m->kv_bytes_per_element <= 0) {
      r.Fail("byte widths must be positive");
    } else if (m->num_experts > 0 &&
               (m->experts_per_token == 0 || m->experts_per_token > m->num_experts ||
                !(m->expert_params > 0) || m->expert_params >= m->total_params)) {
      r.Fail("MoE streaming needs 0 < experts_per_token <= num_experts and "
             "0 < expert_params < total_params");
    }
  }
  return r.error();
}

std::string ReadHardware(const YAML::Node& n, const std::string& where, HardwareSpec* h) {
  if (!n || !n.IsMap()) return where + ": missing 'hardware' section";
  Reader r(n, where + ".hardware");
  r.Required("source", &h->source);
  r.Required("gpu", &h->gpu);
  r.Required("num_gpus", &h->num_gpus);
  r.Required("memory_bytes_per_gpu", &h->memory_bytes_per_gpu);
  r.Required("hbm_bandwidth_bytes_per_s", &h->hbm_bandwidth_bytes_per_s);
  r.Required("peak_flops", &h->peak_flops);
  r.Optional("weight_shards", &h->weight_shards);
  if (r.error().empty() && (h->num_gpus == 0 || h->memory_bytes_per_gpu <= 0 ||
                            h->hbm_bandwidth_bytes_per_s <= 0 || h->peak_flops <= 0)) {
    r.Fail("every hardware number must be positive");
  }
  return r.error();
}

std::string ReadRuntime(const YAML::Node& n, const std::string& where, RuntimeSpec* rt) {
  if (!n || !n.IsMap()) return where + ": missing 'runtime' section";
  Reader r(n, where + ".runtime");
  r.Required("source", &rt->source);
  r.Optional("gpu_memory_utilization", &rt->gpu_memory_utilization);
  r.Optional("activation_reserve_bytes_per_gpu", &rt->activation_reserve_bytes_per_gpu);
  r.Optional("step_overhead_s", &rt->step_overhead_s);
  r.Optional("compute_efficiency", &rt->compute_efficiency);
  r.Optional("memory_efficiency", &rt->memory_efficiency);
  if (r.error().empty()) {
    auto fraction = [](double v) { return v > 0 && v <= 1; };
    if (!fraction(rt->gpu_memory_utilization) || !fraction(rt->compute_efficiency) ||
        !fraction(rt->memory_efficiency)) {
      r.Fail("utilization and efficiencies must be in (0, 1]");
    } else if (rt->step_overhead_s < 0 || rt->activation_reserve_bytes_per_gpu < 0) {
      r.Fail("overhead and reserve must be >= 0");
    }
  }
  return r.error();
}

std::string ReadAnchors(const YAML::Node& n, const std::string& where, std::vector<Anchor>* out) {
  if (!n) return {};
  if (!n.IsSequence()) return where + ": 'anchors' must be a list";
  for (std::size_t i = 0; i < n.size(); ++i) {
    Anchor a;
    std::string metric;
    Reader r(n[i], where + ".anchors[" + std::to_string(i) + "]");
    r.Required("name", &a.name);
    r.Required("source", &a.source);
    r.Required("metric", &metric);
    r.Optional("batch_size", &a.batch_size);
    r.Optional("prompt_tokens", &a.prompt_tokens);
    r.Optional("context_tokens", &a.context_tokens);
    r.Required("min", &a.min);
    r.Required("max", &a.max);
    if (!r.error().empty()) return r.error();
    auto m = ParseMetric(metric);
    if (!m) r.Fail(m.error());
    if (m) a.metric = *m;
    if (a.min <= 0 || a.max < a.min) r.Fail("need 0 < min <= max");
    if (a.batch_size == 0) r.Fail("batch_size must be positive");
    if (a.metric == AnchorMetric::kPrefillTokensPerS && a.prompt_tokens == 0) {
      r.Fail("prefill anchors need prompt_tokens");
    }
    if (!r.error().empty()) return r.error();
    out->push_back(std::move(a));
  }
  return {};
}

std::string ReadLinks(const YAML::Node& n, const std::string& where, std::vector<LinkSpec>* out) {
  if (!n) return {};
  if (!n.IsSequence()) return where + ": 'links' must be a list";
  for (std::size_t i = 0; i < n.size(); ++i) {
    LinkSpec l;
    Reader r(n[i], where + ".links[" + std::to_string(i) + "]");
    r.Required("name", &l.name);
    r.Required("source", &l.source);
    r.Required("bandwidth_bytes_per_s", &l.bandwidth_bytes_per_s);
    r.Required("latency_s", &l.latency_s);
    if (r.error().empty() && (l.name.empty() || !(l.bandwidth_bytes_per_s > 0) || l.latency_s < 0)) {
      r.Fail("a link needs a name, bandwidth > 0 and latency >= 0");
    }
    if (!r.error().empty()) return r.error();
    out->push_back(std::move(l));
  }
  return {};
}

}  // namespace

const LinkSpec* Profile::FindLink(std::string_view link_name) const {
  for (const LinkSpec& l : links) {
    if (link_name.empty() || l.name == link_name) return &l;
  }
  return nullptr;
}

const char* AnchorMetricName(AnchorMetric metric) {
  switch (metric) {
    case AnchorMetric::kPrefillTokensPerS:
      return "prefill_tokens_per_s";
    case AnchorMetric::kDecodeStepS:
      return "decode_step_s";
    case AnchorMetric::kDecodeTokensPerS:
      return "decode_tokens_per_s";
  }
  return "?";
}

std::expected<Profile, std::string> ParseProfile(std::string_view yaml_text,
                                                 std::string_view origin) {
  const std::string where(origin);
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    return std::unexpected(where + ": " + e.what());
  }
  if (!root.IsMap()) return std::unexpected(where + ": not a YAML mapping");
  Profile p;
  Reader r(root, where);
  r.Required("name", &p.name);
  r.Required("served_model_name", &p.served_model_name);
  r.Required("max_model_len", &p.max_model_len);
  if (!r.error().empty()) return std::unexpected(r.error());
  if (p.max_model_len == 0) return std::unexpected(where + ": max_model_len must be positive");
  for (const std::string& err : {ReadModel(root["model"], where, &p.model),
                                 ReadHardware(root["hardware"], where, &p.hardware),
                                 ReadRuntime(root["runtime"], where, &p.runtime),
                                 ReadAnchors(root["anchors"], where, &p.anchors),
                                 ReadLinks(root["links"], where, &p.links)}) {
    if (!err.empty()) return std::unexpected(err);
  }
  return p;
}

std::expected<Profile, std::string> LoadProfile(std::string_view name_or_path) {
  for (std::size_t i = 0; i < internal::kNumEmbeddedProfiles; ++i) {
    const internal::EmbeddedProfile& e = internal::kEmbeddedProfiles[i];
    if (e.name == name_or_path) return ParseProfile(e.yaml, e.name);
  }
  const std::string path(name_or_path);
  const bool looks_like_path =
      path.find('/') != std::string::npos || path.ends_with(".yaml") || path.ends_with(".yml");
  if (!looks_like_path) {
    std::string known;
    for (const std::string& n : ListProfiles()) known += (known.empty() ? "" : ", ") + n;
    return std::unexpected("unknown profile '" + path + "' (known: " + known + ")");
  }
  std::ifstream in(path);
  if (!in) return std::unexpected("cannot read profile file '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return ParseProfile(text.str(), path);
}

std::vector<std::string> ListProfiles() {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < internal::kNumEmbeddedProfiles; ++i) {
    names.emplace_back(internal::kEmbeddedProfiles[i].name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace kvroute::engine

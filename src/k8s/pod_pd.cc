#include "k8s/pod_pd.h"

#include <charconv>
#include <cmath>
#include <initializer_list>
#include <optional>
#include <string_view>
#include <vector>

#include "k8s/json_read.h"

namespace kvroute::k8s {
namespace {

using namespace json_read;

std::string Bad(const char* annotation, const std::string& value, const char* want) {
  return std::string(annotation) + ": '" + value + "' is not " + want;
}

std::expected<void, std::string> Count(const json::object* a, const char* key, std::uint32_t* out) {
  const std::string text = Str(a, key);
  if (text.empty()) return {};
  std::uint32_t n = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || p != text.data() + text.size() || n < 1 || n > 1024) {
    return std::unexpected(Bad(key, text, "an integer in 1..1024"));
  }
  *out = n;
  return {};
}

std::expected<void, std::string> Number(const json::object* a, const char* key, bool positive,
                                        std::optional<double>* out) {
  const std::string text = Str(a, key);
  if (text.empty()) return {};
  double x = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), x);
  const bool ok = ec == std::errc() && p == text.data() + text.size() && std::isfinite(x) &&
                  (positive ? x > 0 : x >= 0);
  if (!ok) return std::unexpected(Bad(key, text, positive ? "a number > 0" : "a number >= 0"));
  *out = x;
  return {};
}

// One container's argv: its command, then its args.
std::vector<std::string> Argv(const json::object* container) {
  std::vector<std::string> argv;
  for (const char* key : {"command", "args"}) {
    const json::value* list = Field(container, key);
    if (!list || !list->is_array()) continue;
    for (const auto& a : list->as_array()) {
      if (a.is_string()) argv.emplace_back(a.as_string());
    }
  }
  return argv;
}

// The value after any of `names` ("--flag V" or "--flag=V"), as vLLM's parser reads it.
std::optional<std::string> FlagValue(const std::vector<std::string>& argv,
                                     std::initializer_list<std::string_view> names) {
  for (std::size_t i = 0; i < argv.size(); ++i) {
    for (std::string_view flag : names) {
      const std::string& a = argv[i];
      if (a == flag && i + 1 < argv.size()) return argv[i + 1];
      if (a.size() > flag.size() && a.starts_with(flag) && a[flag.size()] == '=') {
        return a.substr(flag.size() + 1);
      }
    }
  }
  return std::nullopt;
}

// What vLLM's own arguments say, for the fields no annotation set: the role from
// --kv-transfer-config's kv_role (kv_producer: prefill, kv_consumer: decode, kv_both: mixed),
// the TP from --tensor-parallel-size / -tp. The first container that has either flag; values
// vLLM itself would refuse are ignored (such a pod does not become ready).
void FromVllmArgs(const json::object* pod, bool role_set, bool tp_set, PodPd* out) {
  const json::value* containers = Field(Obj(Field(pod, "spec")), "containers");
  if (!containers || !containers->is_array()) return;
  for (const auto& c : containers->as_array()) {
    const std::vector<std::string> argv = Argv(Obj(&c));
    auto transfer = FlagValue(argv, {"--kv-transfer-config", "--kv_transfer_config"});
    auto tp = FlagValue(argv, {"--tensor-parallel-size", "--tensor_parallel_size", "-tp"});
    if (!transfer && !tp) continue;
    if (transfer && !role_set) {
      if (auto v = Parse(*transfer)) {
        const std::string role = Str(Obj(&*v), "kv_role");
        if (role == "kv_producer") out->role = sched::Role::kPrefill;
        if (role == "kv_consumer") out->role = sched::Role::kDecode;
      }
    }
    if (tp && !tp_set) {
      std::uint32_t n = 0;
      auto [p, ec] = std::from_chars(tp->data(), tp->data() + tp->size(), n);
      if (ec == std::errc() && p == tp->data() + tp->size() && n >= 1 && n <= 1024) out->tp = n;
    }
    return;
  }
}

}  // namespace

void PodPd::ApplyTo(fleet::WorkerSpec* spec) const {
  spec->role = role;
  spec->tp = tp;
  spec->gpus = gpus;
  spec->link = link;
  spec->link_bytes_per_s = link_bytes_per_s;
  spec->link_latency_s = link_latency_s;
}

std::expected<PodPd, std::string> ReadPodPd(const json::object* pod) {
  const json::object* a = Obj(Field(Obj(Field(pod, "metadata")), "annotations"));
  PodPd out;
  if (const std::string role = Str(a, kRoleAnnotation); !role.empty()) {
    if (role == "prefill") {
      out.role = sched::Role::kPrefill;
    } else if (role == "decode") {
      out.role = sched::Role::kDecode;
    } else if (role != "mixed") {
      return std::unexpected(Bad(kRoleAnnotation, role, "one of mixed, prefill, decode"));
    }
  }
  for (auto ok : {Count(a, kTpAnnotation, &out.tp), Count(a, kGpusAnnotation, &out.gpus),
                  Number(a, kLinkBytesPerSAnnotation, true, &out.link_bytes_per_s),
                  Number(a, kLinkLatencySAnnotation, false, &out.link_latency_s)}) {
    if (!ok) return std::unexpected(ok.error());
  }
  if (out.tp != 0 && out.gpus != 0 && out.gpus < out.tp) {
    return std::unexpected(std::string(kGpusAnnotation) + ": " + std::to_string(out.gpus) +
                           " is fewer than " + kTpAnnotation + " (" + std::to_string(out.tp) + ")");
  }
  out.link = Str(a, kLinkAnnotation);
  FromVllmArgs(pod, !Str(a, kRoleAnnotation).empty(), !Str(a, kTpAnnotation).empty(), &out);
  if (out.tp != 0 && out.gpus != 0 && out.gpus < out.tp) {
    return std::unexpected(std::string(kGpusAnnotation) + ": " + std::to_string(out.gpus) +
                           " is fewer than the TP of vLLM's --tensor-parallel-size (" +
                           std::to_string(out.tp) + ")");
  }
  return out;
}

}  // namespace kvroute::k8s

#include "k8s/pod_pd.h"

#include <charconv>
#include <cmath>
#include <string_view>

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
  return out;
}

}  // namespace kvroute::k8s

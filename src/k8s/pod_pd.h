// A discovered pod's prefill/decode fields, read from its annotations, so a pool found through
// Kubernetes runs the two-leg path as a static fleet does (docs/pd.md): the same fields as a
// static worker's `role`, `tp`, `gpus`, `link`, `link_bytes_per_s`, `link_latency_s` and an
// etcd record's (docs/etcd.md), named like `kvroute.io/kv-events-port`:
//   kvroute.io/role               mixed | prefill | decode        (absent: mixed)
//   kvroute.io/tp                 tensor-parallel size, 1..1024   (absent: the profile's GPUs)
//   kvroute.io/gpus               GPUs the pod uses, >= tp        (absent: tp)
//   kvroute.io/link               the profile link a decode leg pulls over (absent: the first)
//   kvroute.io/link-bytes-per-s   bandwidth per lane, > 0         (absent: the link's)
//   kvroute.io/link-latency-s     latency, >= 0                   (absent: the link's)
// A field no annotation sets is read from vLLM's own arguments where they say it (any
// container's command/args, as pod_kv_events.h reads --kv-events-config): the role from
// `--kv-transfer-config` kv_role (kv_producer: prefill, kv_consumer: decode), the TP from
// `--tensor-parallel-size` / `-tp`; so a vLLM P/D pod needs annotations only for its link.
// Annotation values are strings (Kubernetes' rule): "4", "4.5e10". A value that does not
// parse is an error naming the annotation: the pod is not joined (a prefill pod read as mixed
// would be sent whole requests), and the error reaches MembershipSink::Rejected.
// EndpointSlices carry no annotations: that source reads none of this (k8s/README.md).
// Thread safety: pure.
#pragma once

#include <cstdint>
#include <expected>
#include <optional>
#include <string>

#include "fleet/worker_spec.h"

namespace boost::json {
class object;
}

namespace kvroute::k8s {

inline constexpr const char* kRoleAnnotation = "kvroute.io/role";
inline constexpr const char* kTpAnnotation = "kvroute.io/tp";
inline constexpr const char* kGpusAnnotation = "kvroute.io/gpus";
inline constexpr const char* kLinkAnnotation = "kvroute.io/link";
inline constexpr const char* kLinkBytesPerSAnnotation = "kvroute.io/link-bytes-per-s";
inline constexpr const char* kLinkLatencySAnnotation = "kvroute.io/link-latency-s";

// The pod's P/D fields, as fleet::WorkerSpec holds them (role, tp, gpus, link, link_*).
struct PodPd {
  sched::Role role = sched::Role::kMixed;
  std::uint32_t tp = 0;
  std::uint32_t gpus = 0;
  std::string link;
  std::optional<double> link_bytes_per_s;
  std::optional<double> link_latency_s;

  void ApplyTo(fleet::WorkerSpec* spec) const;
  bool operator==(const PodPd&) const = default;
};

// `pod`: the Pod object (null: nothing said, the defaults).
std::expected<PodPd, std::string> ReadPodPd(const boost::json::object* pod);

}  // namespace kvroute::k8s

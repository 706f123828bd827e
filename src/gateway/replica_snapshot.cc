#include "gateway/replica_snapshot.h"

#include <boost/json.hpp>

namespace kvroute::gateway {
namespace {

constexpr std::string_view kFormat = "kvroute-index-snapshot";

}  // namespace

std::string EncodeSiblingSnapshot(const std::vector<SnapshotWorker>& workers,
                                  std::string_view image) {
  boost::json::array list;
  for (const auto& w : workers) list.push_back(boost::json::object{{"id", w.id}, {"name", w.name}});
  boost::json::object head{{"format", kFormat},
                           {"workers", std::move(list)},
                           {"image_bytes", image.size()}};
  std::string out = boost::json::serialize(head);
  out += '\n';
  out.append(image);
  return out;
}

std::expected<SiblingSnapshot, std::string> DecodeSiblingSnapshot(std::string_view body) {
  const std::size_t eol = body.find('\n');
  if (eol == std::string_view::npos) return std::unexpected("snapshot envelope: no header line");
  boost::system::error_code ec;
  boost::json::value head = boost::json::parse(body.substr(0, eol), ec);
  if (ec || !head.is_object()) return std::unexpected("snapshot envelope: header is not JSON");
  const auto& o = head.as_object();
  const auto* format = o.if_contains("format");
  if (!format || !format->is_string() || format->as_string() != kFormat) {
    return std::unexpected("snapshot envelope: not a kvroute index snapshot");
  }
  const auto* bytes = o.if_contains("image_bytes");
  const auto* workers = o.if_contains("workers");
  if (!bytes || !bytes->is_number() || !workers || !workers->is_array()) {
    return std::unexpected("snapshot envelope: image_bytes and workers are required");
  }
  SiblingSnapshot out;
  out.image = std::string(body.substr(eol + 1));
  if (bytes->to_number<std::uint64_t>() != out.image.size()) {
    return std::unexpected("snapshot envelope: the image is truncated");
  }
  for (const auto& w : workers->as_array()) {
    const auto* id = w.is_object() ? w.as_object().if_contains("id") : nullptr;
    const auto* name = w.is_object() ? w.as_object().if_contains("name") : nullptr;
    if (!id || !id->is_number() || !name || !name->is_string()) {
      return std::unexpected("snapshot envelope: a worker needs an id and a name");
    }
    out.workers.push_back({static_cast<WorkerId>(id->to_number<std::uint64_t>()),
                           std::string(name->as_string())});
  }
  return out;
}

}  // namespace kvroute::gateway

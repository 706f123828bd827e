#include "gateway/replica_snapshot.h"

#include <xxhash.h>

#include <boost/json.hpp>
#include <cstring>

namespace kvroute::gateway {
namespace {

constexpr std::string_view kFormat = "kvroute-index-snapshot";
// Record sizes of the v1 image (kv/index/index_snapshot.cc).
constexpr std::size_t kHeaderBytes = 8 + 4 + 4 + 8;  // magic, version, block size, seed
constexpr std::size_t kNodeBytes = 8 + 1 + 8;
constexpr std::size_t kHashBytes = 8 + 8 + 4;
constexpr std::size_t kEntryBytes = 8 + 4 * 2;

// Reads little-endian integers off the front of a view.
class Cursor {
 public:
  explicit Cursor(std::string_view in) : in_(in) {}
  template <typename T>
  bool Get(T* v) {
    if (in_.size() - pos_ < sizeof(T)) return false;
    std::memcpy(v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  // Skips `n` records of `bytes` each, if that many are there.
  bool Skip(std::uint64_t n, std::size_t bytes) {
    if (n > (in_.size() - pos_) / bytes) return false;
    pos_ += static_cast<std::size_t>(n) * bytes;
    return true;
  }
  std::size_t pos() const { return pos_; }
  bool AtEnd() const { return pos_ == in_.size(); }

 private:
  std::string_view in_;
  std::size_t pos_ = 0;
};

template <typename T>
void Put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(v));
}

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

std::expected<std::string, std::string> RemapSnapshotWorkers(
    std::string_view image, const std::map<WorkerId, WorkerId>& ids) {
  auto broken = [](const char* what) {
    return std::unexpected(std::string("snapshot: ") + what);
  };
  if (image.size() < kHeaderBytes + 8 + 8 + 8) return broken("truncated");
  const std::string_view body = image.substr(0, image.size() - 8);
  Cursor c(body);
  if (!c.Skip(1, kHeaderBytes)) return broken("truncated header");
  std::uint64_t nodes = 0;
  if (!c.Get(&nodes) || !c.Skip(nodes, kNodeBytes)) return broken("bad node section");
  std::string out(body.substr(0, c.pos()));
  std::uint64_t workers = 0;
  if (!c.Get(&workers)) return broken("bad worker count");
  std::string kept;
  std::uint64_t kept_count = 0;
  for (std::uint64_t i = 0; i < workers; ++i) {
    const std::size_t start = c.pos();
    std::uint32_t id = 0;
    std::uint8_t stale = 0;
    std::uint64_t hashes = 0, entries = 0;
    if (!c.Get(&id) || !c.Get(&stale) || !c.Get(&hashes) || !c.Skip(hashes, kHashBytes) ||
        !c.Get(&entries) || !c.Skip(entries, kEntryBytes)) {
      return broken("bad worker section");
    }
    auto it = ids.find(static_cast<WorkerId>(id));
    if (it == ids.end()) continue;
    Put<std::uint32_t>(kept, static_cast<std::uint32_t>(it->second));
    kept.append(body.substr(start + 4, c.pos() - start - 4));
    ++kept_count;
  }
  if (!c.AtEnd()) return broken("trailing bytes");
  Put<std::uint64_t>(out, kept_count);
  out += kept;
  Put<std::uint64_t>(out, XXH3_64bits(out.data(), out.size()));
  return out;
}

}  // namespace kvroute::gateway

#include "store/store_wire.h"

#include <boost/json.hpp>

namespace kvroute::store {
namespace {

std::optional<std::uint64_t> U64(const boost::json::value& v) {
  if (v.is_uint64()) return v.get_uint64();
  if (v.is_int64() && v.get_int64() >= 0) return static_cast<std::uint64_t>(v.get_int64());
  return std::nullopt;
}

std::expected<boost::json::object, std::string> ParseObject(const std::string& body) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(body, ec);
  if (ec || !v.is_object()) return std::unexpected("the body must be a JSON object");
  return std::move(v.as_object());
}

}  // namespace

std::string EncodeMatch(std::span<const kv::EngineHash> hashes) {
  boost::json::array a;
  a.reserve(hashes.size());
  for (kv::EngineHash h : hashes) a.emplace_back(static_cast<std::uint64_t>(h));
  return boost::json::serialize(boost::json::object{{"hashes", std::move(a)}});
}

std::expected<std::vector<kv::EngineHash>, std::string> DecodeMatch(const std::string& body) {
  auto o = ParseObject(body);
  if (!o) return std::unexpected(o.error());
  const auto* hashes = o->if_contains("hashes");
  if (hashes == nullptr || !hashes->is_array()) return std::unexpected("'hashes' must be an array");
  std::vector<kv::EngineHash> out;
  out.reserve(hashes->get_array().size());
  for (const auto& h : hashes->get_array()) {
    auto v = U64(h);
    if (!v) return std::unexpected("'hashes' must hold unsigned 64-bit integers");
    out.push_back(*v);
  }
  return out;
}

std::string EncodePut(std::span<const engine::BlockMeta> blocks, std::uint32_t block_size,
                      double size_bytes_per_block) {
  boost::json::array a;
  a.reserve(blocks.size());
  for (const engine::BlockMeta& b : blocks) {
    boost::json::object o;
    o["hash"] = static_cast<std::uint64_t>(b.hash);
    if (b.parent_hash) {
      o["parent"] = static_cast<std::uint64_t>(*b.parent_hash);
    } else {
      o["parent"] = nullptr;
    }
    boost::json::array tokens;
    if (b.payload) {
      for (TokenId t : b.payload->tokens) tokens.emplace_back(static_cast<std::int64_t>(t));
      o["lora_name"] = b.payload->lora_name;
    }
    o["tokens"] = std::move(tokens);
    o["size_bytes"] = size_bytes_per_block;
    a.push_back(std::move(o));
  }
  return boost::json::serialize(
      boost::json::object{{"block_size", block_size}, {"blocks", std::move(a)}});
}

std::expected<PutMessage, std::string> DecodePut(const std::string& body) {
  auto o = ParseObject(body);
  if (!o) return std::unexpected(o.error());
  PutMessage m;
  const auto* bs = o->if_contains("block_size");
  if (bs == nullptr || !U64(*bs) || *U64(*bs) == 0) {
    return std::unexpected("'block_size' must be a positive integer");
  }
  m.block_size = static_cast<std::uint32_t>(*U64(*bs));
  const auto* blocks = o->if_contains("blocks");
  if (blocks == nullptr || !blocks->is_array()) return std::unexpected("'blocks' must be an array");
  for (const auto& v : blocks->get_array()) {
    if (!v.is_object()) return std::unexpected("each block must be an object");
    const auto& b = v.get_object();
    StoredBlock sb;
    const auto* hash = b.if_contains("hash");
    if (hash == nullptr || !U64(*hash)) return std::unexpected("'hash' must be an unsigned integer");
    sb.meta.hash = *U64(*hash);
    sb.meta.key = sb.meta.hash;  // the store keys by engine hash only
    if (const auto* p = b.if_contains("parent"); p != nullptr && !p->is_null()) {
      if (!U64(*p)) return std::unexpected("'parent' must be an unsigned integer or null");
      sb.meta.parent_hash = *U64(*p);
    }
    engine::BlockPayload payload;
    if (const auto* t = b.if_contains("tokens"); t != nullptr && t->is_array()) {
      for (const auto& id : t->get_array()) {
        if (!id.is_int64()) return std::unexpected("'tokens' must be integers");
        payload.tokens.push_back(static_cast<TokenId>(id.get_int64()));
      }
    }
    if (payload.tokens.size() != m.block_size) {
      return std::unexpected("each block needs exactly block_size tokens");
    }
    if (const auto* l = b.if_contains("lora_name"); l != nullptr && l->is_string()) {
      payload.lora_name = std::string(l->get_string());
    }
    sb.meta.payload = std::make_shared<const engine::BlockPayload>(std::move(payload));
    const auto* size = b.if_contains("size_bytes");
    if (size == nullptr || !size->is_number() || size->to_number<double>() < 0) {
      return std::unexpected("'size_bytes' must be a non-negative number");
    }
    sb.size_bytes = size->to_number<double>();
    m.blocks.push_back(std::move(sb));
  }
  return m;
}

std::string EncodeRelease(std::uint64_t lease_id) {
  return boost::json::serialize(boost::json::object{{"lease", lease_id}});
}

std::expected<std::uint64_t, std::string> DecodeRelease(const std::string& body) {
  auto o = ParseObject(body);
  if (!o) return std::unexpected(o.error());
  const auto* lease = o->if_contains("lease");
  if (lease == nullptr || !U64(*lease) || *U64(*lease) == 0) {
    return std::unexpected("'lease' must be a positive integer (a lease id from /v1/kv/lease)");
  }
  return *U64(*lease);
}

std::expected<LeaseReply, std::string> DecodeLeaseReply(const std::string& body) {
  auto o = ParseObject(body);
  if (!o) return std::unexpected(o.error());
  const auto* lease = o->if_contains("lease");
  const auto* leased = o->if_contains("leased");
  if (lease == nullptr || !U64(*lease) || leased == nullptr || !U64(*leased)) {
    return std::unexpected("a lease reply needs unsigned 'lease' and 'leased'");
  }
  return LeaseReply{.lease = *U64(*lease), .leased = *U64(*leased)};
}

std::string EncodeLeaseReply(const LeaseGrant& grant) {
  return boost::json::serialize(boost::json::object{
      {"lease", grant.id}, {"leased", static_cast<std::uint64_t>(grant.blocks)}});
}

}  // namespace kvroute::store

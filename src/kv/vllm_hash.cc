#include "kv/vllm_hash.h"

#include <openssl/evp.h>

#include <cstdio>
#include <stdexcept>

namespace kvroute::kv {
namespace {

// Canonical CBOR head: major type in the top 3 bits, shortest argument encoding.
void AppendHead(std::vector<std::uint8_t>* out, std::uint8_t major, std::uint64_t value) {
  const std::uint8_t mt = static_cast<std::uint8_t>(major << 5);
  if (value < 24) {
    out->push_back(mt | static_cast<std::uint8_t>(value));
    return;
  }
  int bytes;
  std::uint8_t info;
  if (value <= 0xff) {
    bytes = 1, info = 24;
  } else if (value <= 0xffff) {
    bytes = 2, info = 25;
  } else if (value <= 0xffffffffULL) {
    bytes = 4, info = 26;
  } else {
    bytes = 8, info = 27;
  }
  out->push_back(mt | info);
  for (int i = bytes - 1; i >= 0; --i) out->push_back(static_cast<std::uint8_t>(value >> (8 * i)));
}

constexpr std::uint8_t kMajorUnsigned = 0, kMajorBytes = 2, kMajorText = 3, kMajorArray = 4;
constexpr std::uint8_t kCborNull = 0xf6;

Sha256Digest Sha256(std::span<const std::uint8_t> data) {
  Sha256Digest digest;
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), digest.bytes.data(), &len, EVP_sha256(), nullptr) != 1 ||
      len != digest.bytes.size()) {
    throw std::runtime_error("SHA-256 failed");  // only on a broken OpenSSL install
  }
  return digest;
}

}  // namespace

std::uint64_t Sha256Digest::Low64() const {
  std::uint64_t v = 0;
  for (int i = 24; i < 32; ++i) v = (v << 8) | bytes[i];
  return v;
}

std::string Sha256Digest::Hex() const {
  std::string hex;
  hex.reserve(64);
  char buf[3];
  for (auto b : bytes) {
    std::snprintf(buf, sizeof(buf), "%02x", b);
    hex.append(buf, 2);
  }
  return hex;
}

Sha256Digest VllmNoneHash(std::string_view python_hash_seed) {
  std::vector<std::uint8_t> cbor;
  AppendHead(&cbor, kMajorText, python_hash_seed.size());
  cbor.insert(cbor.end(), python_hash_seed.begin(), python_hash_seed.end());
  return Sha256(cbor);
}

std::vector<std::uint8_t> VllmBlockHashInput(const Sha256Digest& parent,
                                             std::span<const TokenId> block_tokens,
                                             std::span<const VllmExtraKey> extra_keys) {
  std::vector<std::uint8_t> cbor;
  cbor.reserve(40 + block_tokens.size() * 5);
  AppendHead(&cbor, kMajorArray, 3);
  AppendHead(&cbor, kMajorBytes, parent.bytes.size());
  cbor.insert(cbor.end(), parent.bytes.begin(), parent.bytes.end());
  AppendHead(&cbor, kMajorArray, block_tokens.size());
  for (TokenId t : block_tokens) AppendHead(&cbor, kMajorUnsigned, t);
  if (extra_keys.empty()) {
    cbor.push_back(kCborNull);
  } else {
    AppendHead(&cbor, kMajorArray, extra_keys.size());
    for (const auto& key : extra_keys) {
      AppendHead(&cbor, kMajorText, key.size());
      cbor.insert(cbor.end(), key.begin(), key.end());
    }
  }
  return cbor;
}

Sha256Digest VllmBlockHash(const Sha256Digest& parent, std::span<const TokenId> block_tokens,
                           std::span<const VllmExtraKey> extra_keys) {
  return Sha256(VllmBlockHashInput(parent, block_tokens, extra_keys));
}

std::vector<Sha256Digest> VllmBlockHashes(std::span<const TokenId> tokens, std::uint32_t block_size,
                                          const Sha256Digest& none_hash,
                                          std::string_view lora_name, std::string_view cache_salt) {
  std::vector<Sha256Digest> out;
  const std::size_t n = tokens.size() / block_size;
  out.reserve(n);
  Sha256Digest parent = none_hash;
  std::vector<VllmExtraKey> extras;
  for (std::size_t b = 0; b < n; ++b) {
    extras.clear();
    if (!lora_name.empty()) extras.emplace_back(lora_name);
    if (b == 0 && !cache_salt.empty()) extras.emplace_back(cache_salt);
    parent = VllmBlockHash(parent, tokens.subspan(b * block_size, block_size), extras);
    out.push_back(parent);
  }
  return out;
}

}  // namespace kvroute::kv

#include "kv/keys/vllm_hash.h"

#include <openssl/evp.h>

#include <cstdio>
#include <stdexcept>

namespace kvroute::kv {
namespace {

constexpr std::uint8_t kMajorUnsigned = 0, kMajorBytes = 2, kMajorText = 3, kMajorArray = 4;

void AppendHead(std::vector<std::uint8_t>* out, std::uint8_t major, std::uint64_t value) {
  AppendCborHead(out, major, value);
}

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
                                             const BlockExtraKeys& extra_keys) {
  std::vector<std::uint8_t> cbor;
  cbor.reserve(40 + block_tokens.size() * 5);
  AppendHead(&cbor, kMajorArray, 3);
  AppendHead(&cbor, kMajorBytes, parent.bytes.size());
  cbor.insert(cbor.end(), parent.bytes.begin(), parent.bytes.end());
  AppendHead(&cbor, kMajorArray, block_tokens.size());
  for (TokenId t : block_tokens) AppendHead(&cbor, kMajorUnsigned, t);
  AppendExtraKeysCbor(extra_keys, &cbor);
  return cbor;
}

Sha256Digest VllmBlockHash(const Sha256Digest& parent, std::span<const TokenId> block_tokens,
                           const BlockExtraKeys& extra_keys) {
  return Sha256(VllmBlockHashInput(parent, block_tokens, extra_keys));
}

std::vector<Sha256Digest> VllmBlockHashes(std::span<const TokenId> tokens, std::uint32_t block_size,
                                          const Sha256Digest& none_hash,
                                          const ExtraKeyInputs& inputs) {
  std::vector<Sha256Digest> out;
  const std::size_t n = tokens.size() / block_size;
  out.reserve(n);
  Sha256Digest parent = none_hash;
  for (std::size_t b = 0; b < n; ++b) {
    parent = VllmBlockHash(parent, tokens.subspan(b * block_size, block_size),
                           BlockExtraKeysFor(inputs, b * block_size, (b + 1) * block_size));
    out.push_back(parent);
  }
  return out;
}

}  // namespace kvroute::kv

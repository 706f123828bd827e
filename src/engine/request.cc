#include "engine/request.h"

#include <xxhash.h>

#include <algorithm>

namespace kvroute::engine {
namespace {

std::uint64_t SplitMix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

OutputPlan::OutputPlan(std::uint64_t engine_seed, const RequestSpec& spec) {
  const std::uint64_t prompt_hash =
      XXH3_64bits_withSeed(spec.prompt.data(), spec.prompt.size() * sizeof(TokenId),
                           SplitMix64(engine_seed ^ SplitMix64(spec.seed)));
  seed_ = SplitMix64(prompt_hash);
  const std::uint32_t max_tokens = spec.max_tokens == 0 ? 1 : spec.max_tokens;
  // A P/D prefill leg ends capped at max_tokens: vLLM hands its KV over only then.
  if (spec.ignore_eos || spec.remote_decode) {
    length_ = max_tokens;
    reason_ = FinishReason::kLength;
  } else {
    length_ = 1 + static_cast<std::uint32_t>(SplitMix64(seed_ ^ 0x656f73ULL) % max_tokens);
    reason_ = FinishReason::kStop;
  }
}

TokenId OutputPlan::Token(std::uint32_t k, std::span<const TokenId> palette) const {
  return palette[SplitMix64(seed_ + k) % palette.size()];
}

Request::Request(RequestSpec s, std::uint64_t arrival_index, std::uint64_t engine_seed)
    : spec(std::move(s)), arrival(arrival_index), plan(engine_seed, spec) {
  // One allocation for the whole sequence (outputs are appended one per step), and the prompt
  // is kept once: `tokens` holds it from here on, so spec.prompt is released.
  const std::size_t expected = spec.prompt.size() + std::min<std::size_t>(spec.max_tokens, 4096);
  tokens.reserve(expected);
  tokens.assign(spec.prompt.begin(), spec.prompt.end());
  std::vector<TokenId>().swap(spec.prompt);
  num_prompt_tokens = static_cast<std::uint32_t>(tokens.size());
  remote_pending = spec.remote_prefill.has_value();
}

kv::BlockExtraKeys Request::BlockExtraKeys(std::size_t i, std::uint32_t block_size) const {
  const kv::ExtraKeyInputs in = extra_key_inputs();
  if (in.empty()) return {};
  return kv::BlockExtraKeysFor(in, i * block_size, (i + 1) * block_size);
}

BlockHasher::BlockHasher(std::uint32_t block_size, EventHash mode,
                         std::string_view python_hash_seed)
    : keyer_(block_size), mode_(mode), none_hash_(kv::VllmNoneHash(python_hash_seed)) {}

void BlockHasher::Extend(Request* req) const {
  const std::uint32_t bs = keyer_.block_size();
  const std::size_t full = req->tokens.size() / bs;
  if (req->keys.empty()) {  // one allocation each for the sequence's expected length
    req->keys.reserve(req->tokens.capacity() / bs);
    req->hashes.reserve(req->tokens.capacity() / bs);
  }
  while (req->keys.size() < full) {
    const std::size_t i = req->keys.size();
    const std::span<const TokenId> block(req->tokens.data() + i * bs, bs);
    const kv::BlockKey parent = i == 0 ? keyer_.Root() : req->keys.back();
    // The one rule for extra keys (kv/keys/extra_keys.h), as vLLM applies it.
    const kv::BlockExtraKeys extra = req->BlockExtraKeys(i, bs);
    req->keys.push_back(keyer_.Next(parent, block, extra));
    if (mode_ == EventHash::kBlockKey) {
      req->hashes.push_back(req->keys.back());
      continue;
    }
    req->last_digest = kv::VllmBlockHash(i == 0 ? none_hash_ : req->last_digest, block, extra);
    req->hashes.push_back(req->last_digest.Low64());
  }
}

}  // namespace kvroute::engine

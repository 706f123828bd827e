// The output palette of `kvroute sim`: token ids of real words of the tokenizer, so that
// generated text reads as (random) English and decodes cleanly token by token.
//
// A word is used when the tokenizer encodes it (with a leading space, as BPE vocabularies
// spell mid-sentence words) to exactly one token. A tokenizer that keeps spaces as their own
// tokens (SimpleTokenizer) gets bare words plus the space token, repeated so that about every
// other token is a space. If no word qualifies, the palette is empty and the engine falls back
// to its default ids.
//
// Thread safety: pure function; the tokenizer is only read.
#pragma once

#include <vector>

#include "common/types.h"
#include "tokenize/tokenizer.h"

namespace kvroute::sim {

std::vector<TokenId> BuildOutputPalette(const tokenize::Tokenizer& tokenizer);

}  // namespace kvroute::sim

// The output palette of `kvroute sim`: token ids of real words of the tokenizer, so that
// generated text reads as (random) English and decodes cleanly token by token.
//
// A word is used when the tokenizer encodes it (with a leading space, as BPE vocabularies
// spell mid-sentence words) to exactly one token; for a tokenizer that keeps spaces as their
// own tokens (SimpleTokenizer), bare words and the space token are the candidates. A candidate
// is kept only if every pair of kept tokens, decoded and re-encoded, gives the same two ids:
// the engine samples tokens independently, and a client that sends the reply back as text
// must get the same ids so the reply's cached blocks are hit, as with a real model. Under
// SimpleTokenizer's 3-byte chunks that leaves the 3-letter words and no space token (the
// text reads "theandfor..."); BPE tokenizers keep their spaced words. If no word qualifies,
// the palette is empty and the engine falls back to its default ids.
//
// Thread safety: pure function; the tokenizer is only read.
#pragma once

#include <vector>

#include "common/types.h"
#include "tokenize/tokenizer.h"

namespace kvroute::sim {

std::vector<TokenId> BuildOutputPalette(const tokenize::Tokenizer& tokenizer);

}  // namespace kvroute::sim

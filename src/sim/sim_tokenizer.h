// The tokenizer of `kvroute sim` (--tokenizer NAME|DIR): SimpleTokenizer when none is given,
// otherwise the exact Hugging Face tokenizer of a model directory or of a shipped model, so
// /tokenize, /detokenize, chat rendering and output text are those of that model.
//
// Resolution of `spec`:
//   empty                         SimpleTokenizer (no model files needed)
//   a directory                   tokenize::LoadHfTokenizer(spec) (tokenizer.json +
//                                 tokenizer_config.json)
//   a shipped model name          tokenize::FindShippedModelDir(spec), then as a directory
//                                 (qwen3, llama3_1, deepseek_v3)
// A directory wins over a shipped name of the same spelling: a path the user typed is what
// they meant. Anything else is an error that names both possibilities.
//
// Thread safety: pure function; the returned tokenizer is immutable and thread-safe.
#pragma once

#include <expected>
#include <string>

#include "tokenize/tokenizer.h"

namespace kvroute::sim {

std::expected<tokenize::TokenizerPtr, std::string> LoadSimTokenizer(const std::string& spec);

}  // namespace kvroute::sim

// PreTokenizer: cuts normalized text into the words that BPE encodes independently, as the
// "pre_tokenizer" of a Hugging Face tokenizer.json does.
//
// Supported (what current byte-level BPE models use): a Sequence of Split pre-tokenizers with
// a Regex pattern, behavior "Isolated" and invert false, followed by a ByteLevel
// pre-tokenizer with use_regex false (byte-level mapping only; kvroute's BPE works on raw
// bytes, so that step is the identity here) — or a lone ByteLevel with use_regex true, whose
// GPT-2 pattern is then applied. Anything else is rejected at load time.
//
// Patterns are compiled with PCRE2 (UTF, UCP, JIT). `\s`/`\S` are rewritten to
// `\p{White_Space}`/`\P{White_Space}` because PCRE2's `\s` misses U+0085, whereas the Rust
// regex crate (and tokenizers.js, which rewrites them the same way) use White_Space.
//
// Thread safety: immutable after Create; Split is safe to call concurrently (match data and
// JIT stacks are per thread).
#pragma once

#include <expected>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kvroute::tokenize {

class RegexSplitter;

class PreTokenizer {
 public:
  // `patterns`: the Split regexes, applied in order (each refines the pieces of the last).
  static std::expected<PreTokenizer, std::string> Create(const std::vector<std::string>& patterns);

  PreTokenizer();  // no patterns: the whole text is one word
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

  // Appends the words of `text` (views into `text`; they concatenate back to `text`).
  void Split(std::string_view text, std::vector<std::string_view>* words) const;

 private:
  std::vector<std::unique_ptr<RegexSplitter>> splitters_;
};

// Rewrites a tokenizer.json (Oniguruma / Rust regex) pattern into PCRE2 syntax. Exposed for
// tests.
std::string RewritePatternForPcre2(std::string_view pattern);

// GPT-2's byte-level pre-tokenization pattern (ByteLevel with use_regex true).
inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace kvroute::tokenize

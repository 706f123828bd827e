#include "tokenize/bpe/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tokenize/utf8.h"

namespace kvroute::tokenize {

// One compiled Split pattern with "Isolated" behaviour: matches and the gaps between them
// both become pieces.
class RegexSplitter {
 public:
  static std::expected<std::unique_ptr<RegexSplitter>, std::string> Create(
      std::string_view pattern) {
    const std::string rewritten = RewritePatternForPcre2(pattern);
    int err = 0;
    PCRE2_SIZE offset = 0;
    pcre2_code* code =
        pcre2_compile(reinterpret_cast<PCRE2_SPTR>(rewritten.data()), rewritten.size(),
                      PCRE2_UTF | PCRE2_UCP, &err, &offset, nullptr);
    if (code == nullptr) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof(msg));
      return std::unexpected("pre-tokenizer regex does not compile at offset " +
                             std::to_string(offset) + ": " + reinterpret_cast<char*>(msg));
    }
    // JIT is a speed-up only; the interpreter gives the same matches if it is unavailable.
    const bool jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
    if (!jit) {
      // Fall back to the interpreter: same matches, slower.
    }
    return std::unique_ptr<RegexSplitter>(new RegexSplitter(code));
  }
  ~RegexSplitter() { pcre2_code_free(code_); }
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  void Split(std::string_view text, std::vector<std::string_view>* out) const {
    ThreadState& ts = State();
    std::size_t prev = 0, pos = 0;
    while (pos <= text.size()) {
      const int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), pos,
                                 PCRE2_NO_UTF_CHECK, ts.match_data, ts.context);
      if (rc < 0) break;  // no more matches (or a resource limit: the rest stays one piece)
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(ts.match_data);
      const std::size_t start = ov[0], end = ov[1];
      if (start > prev) out->push_back(text.substr(prev, start - prev));
      if (end > start) {
        out->push_back(text.substr(start, end - start));
        pos = end;
      } else {
        // An empty match: advance one code point, as JS matchAll and Rust find_iter do.
        if (start >= text.size()) break;
        pos = start + utf8::SequenceLength(static_cast<unsigned char>(text[start]));
      }
      prev = end;
    }
    if (prev < text.size()) out->push_back(text.substr(prev));
  }

 private:
  struct ThreadState {
    pcre2_match_data* match_data = nullptr;
    pcre2_match_context* context = nullptr;
    pcre2_jit_stack* jit_stack = nullptr;
    ThreadState() {
      match_data = pcre2_match_data_create(4, nullptr);
      context = pcre2_match_context_create(nullptr);
      // `\s+(?!\S)` backtracks over whole whitespace runs: give JIT more than its 32 KiB.
      jit_stack = pcre2_jit_stack_create(64 * 1024, 8 * 1024 * 1024, nullptr);
      pcre2_jit_stack_assign(context, nullptr, jit_stack);
    }
    ~ThreadState() {
      pcre2_jit_stack_free(jit_stack);
      pcre2_match_context_free(context);
      pcre2_match_data_free(match_data);
    }
  };
  static ThreadState& State() {
    thread_local ThreadState state;
    return state;
  }
  explicit RegexSplitter(pcre2_code* code) : code_(code) {}
  pcre2_code* code_;
};

std::string RewritePatternForPcre2(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 32);
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i] == '\\' && i + 1 < p.size()) {
      const char c = p[i + 1];
      if (c == 's') {
        out += "\\p{White_Space}";
      } else if (c == 'S') {
        out += "\\P{White_Space}";
      } else {
        out += p.substr(i, 2);
      }
      ++i;
      continue;
    }
    out.push_back(p[i]);
  }
  return out;
}

PreTokenizer::PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

std::expected<PreTokenizer, std::string> PreTokenizer::Create(
    const std::vector<std::string>& patterns) {
  PreTokenizer p;
  for (const auto& pattern : patterns) {
    auto s = RegexSplitter::Create(pattern);
    if (!s) return std::unexpected(s.error());
    p.splitters_.push_back(std::move(*s));
  }
  return p;
}

void PreTokenizer::Split(std::string_view text, std::vector<std::string_view>* words) const {
  if (splitters_.empty()) {
    if (!text.empty()) words->push_back(text);
    return;
  }
  std::vector<std::string_view> current{text}, next;
  for (std::size_t k = 0; k < splitters_.size(); ++k) {
    std::vector<std::string_view>* dst = k + 1 == splitters_.size() ? words : &next;
    if (dst == &next) next.clear();
    for (std::string_view piece : current) splitters_[k]->Split(piece, dst);
    if (dst == &next) std::swap(current, next);
  }
}

}  // namespace kvroute::tokenize

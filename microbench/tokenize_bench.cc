// Tokenizer benchmarks (Google Benchmark).
//
//   BM_EncodeCorpus/<model>    cold encode throughput (bytes/s) over a corpus of texts: the
//                              oracle corpus when KVROUTE_TOKENIZE_CORPUS names a JSONL file of
//                              strings (microbench/tokenize_compare.mjs writes one), else a built-in
//                              mixed-language corpus. Encode() never uses the segment cache.
//   BM_ChatTurn30Cold/<model>  render + encode turn 30 of a ~75k-token conversation with no
//                              cached segments.
//   BM_ChatTurn30Warm/<model>  the same after turns 1..29 were encoded (segment cache warm);
//                              the final user message differs per iteration, so it is always
//                              new text, as in a live conversation.
//
// Models: 0 = qwen3, 1 = llama3_1, 2 = deepseek_v3 (skipped when not installed).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "tokenize/hf_tokenizer.h"
#include "tokenize/jinja/jinja_json.h"

namespace kvroute::tokenize {
namespace {

std::shared_ptr<const HfTokenizer> Model(int index) {
  static std::map<int, std::shared_ptr<const HfTokenizer>> cache;
  if (auto it = cache.find(index); it != cache.end()) return it->second;
  std::shared_ptr<const HfTokenizer> tok;
  if (auto dir = FindShippedModelDir(ShippedModelNames()[static_cast<std::size_t>(index)])) {
    if (auto t = LoadHfTokenizer(*dir)) tok = std::static_pointer_cast<const HfTokenizer>(*t);
  }
  cache[index] = tok;
  return tok;
}

// Deterministic pseudo-text: words, numbers, punctuation, some code and non-Latin scripts.
std::string SyntheticText(std::uint64_t seed, std::size_t bytes) {
  static const char* kWords[] = {"the",
                                 "router",
                                 "sends",
                                 "each",
                                 "request",
                                 "to",
                                 "worker",
                                 "whose",
                                 "cache",
                                 "holds",
                                 "longest",
                                 "prefix",
                                 "of",
                                 "prompt",
                                 "tokens",
                                 "latency",
                                 "throughput",
                                 "block",
                                 "hash",
                                 "function",
                                 "return",
                                 "value",
                                 "if",
                                 "else",
                                 "for",
                                 "while",
                                 "int",
                                 "std::vector<int>",
                                 "Größe",
                                 "über",
                                 "naïve",
                                 "日本語",
                                 "中文",
                                 "テキスト",
                                 "안녕하세요",
                                 "Привет",
                                 "مرحبا",
                                 "🙂",
                                 "—",
                                 "(x, y)",
                                 "{\"key\": 1}",
                                 "x += 1;",
                                 "12345",
                                 "3.14159",
                                 "\n",
                                 "\n\n",
                                 "  ",
                                 "I'm",
                                 "we'll",
                                 "it's",
                                 "HTTP/1.1",
                                 "GET",
                                 "/v1/chat/completions",
                                 "a_b_c",
                                 "CamelCase"};
  std::string out;
  std::uint64_t x = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  while (out.size() < bytes) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    const char* w = kWords[(x >> 33) % (sizeof(kWords) / sizeof(kWords[0]))];
    out += w;
    out += ((x >> 20) % 7 == 0) ? ". " : " ";
  }
  return out;
}

const std::vector<std::string>& Corpus() {
  static const std::vector<std::string> corpus = [] {
    std::vector<std::string> texts;
    if (const char* path = std::getenv("KVROUTE_TOKENIZE_CORPUS"); path != nullptr) {
      std::ifstream in(path);
      std::string line;
      while (std::getline(in, line)) {
        if (auto v = jinja::ParseJson(line); v && v->IsString()) texts.push_back(v->s);
      }
    }
    if (texts.empty()) {
      for (std::uint64_t k = 0; k < 2000; ++k)
        texts.push_back(SyntheticText(k, 50 + (k * 37) % 400));
    }
    return texts;
  }();
  return corpus;
}

void BM_EncodeCorpus(benchmark::State& state) {
  auto tok = Model(static_cast<int>(state.range(0)));
  if (!tok) {
    state.SkipWithError("model not installed");
    return;
  }
  const auto& texts = Corpus();
  std::size_t bytes = 0, tokens = 0;
  for (auto _ : state) {
    for (const auto& t : texts) {
      auto ids = tok->Encode(t, false);
      tokens += ids.size();
      bytes += t.size();
      benchmark::DoNotOptimize(ids.data());
    }
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
  state.counters["tokens_per_byte"] = static_cast<double>(tokens) / static_cast<double>(bytes);
}
// Wall time, like the JavaScript side of microbench/tokenize_compare.mjs.
BENCHMARK(BM_EncodeCorpus)->DenseRange(0, 2)->Unit(benchmark::kMillisecond)->UseRealTime();

// A 30-turn conversation, ~2,500 tokens per message pair, ~75k tokens in all.
ChatRequest Conversation(int turns, const std::string& last_user_suffix) {
  ChatRequest req;
  req.messages.push_back(
      {.role = "system", .content = "You are a helpful assistant. " + SyntheticText(1, 2000)});
  for (int t = 0; t < turns; ++t) {
    std::string user = SyntheticText(100 + static_cast<std::uint64_t>(t), 4000);
    if (t == turns - 1) user += last_user_suffix;
    req.messages.push_back({.role = "user", .content = std::move(user)});
    if (t < turns - 1) {
      req.messages.push_back({.role = "assistant",
                              .content = SyntheticText(500 + static_cast<std::uint64_t>(t), 5000)});
    }
  }
  return req;
}

void BM_ChatTurn30Cold(benchmark::State& state) {
  auto tok = Model(static_cast<int>(state.range(0)));
  if (!tok) {
    state.SkipWithError("model not installed");
    return;
  }
  const ChatRequest req = Conversation(30, "");
  std::size_t tokens = 0;
  for (auto _ : state) {
    auto text = tok->RenderChat(req);
    auto ids = tok->Encode(*text, false);  // no segment cache
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.counters["prompt_tokens"] = static_cast<double>(tokens);
}
BENCHMARK(BM_ChatTurn30Cold)->DenseRange(0, 2)->Unit(benchmark::kMicrosecond);

void BM_ChatTurn30Render(benchmark::State& state) {
  auto tok = Model(static_cast<int>(state.range(0)));
  if (!tok) {
    state.SkipWithError("model not installed");
    return;
  }
  const ChatRequest req = Conversation(30, "");
  for (auto _ : state) {
    auto text = tok->RenderChat(req);
    benchmark::DoNotOptimize(text->data());
  }
}
BENCHMARK(BM_ChatTurn30Render)->DenseRange(0, 2)->Unit(benchmark::kMicrosecond);

void BM_ChatTurn30Warm(benchmark::State& state) {
  auto tok = Model(static_cast<int>(state.range(0)));
  if (!tok) {
    state.SkipWithError("model not installed");
    return;
  }
  (void)tok->EncodeChat(Conversation(29, ""));  // turns 1..29: the conversation so far
  std::size_t tokens = 0;
  std::uint64_t iteration = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const ChatRequest req = Conversation(30, " (variant " + std::to_string(iteration++) + ")");
    state.ResumeTiming();
    auto ids = tok->EncodeChat(req);
    tokens = ids->size();
    benchmark::DoNotOptimize(ids->data());
  }
  state.counters["prompt_tokens"] = static_cast<double>(tokens);
}
BENCHMARK(BM_ChatTurn30Warm)->DenseRange(0, 2)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kvroute::tokenize

BENCHMARK_MAIN();

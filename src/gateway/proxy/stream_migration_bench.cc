// What reading a stream's text for migration (StreamedText::Feed) costs the relay, per
// streamed chat answer of 32 token events as vLLM writes them, against what the relay already
// does with every piece (SseTokenCounter::Feed), in the same run. docs/bench/stream-migration.md.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "gateway/proxy/proxy_sse_count.h"
#include "gateway/proxy/stream_migration.h"

namespace kvroute::gateway {
namespace {

// One piece per event, as a worker that flushes every token sends them.
std::vector<std::string> ChatStream() {
  const std::string head =
      R"(data: {"id":"chatcmpl-5f1c","object":"chat.completion.chunk","created":1764650000,)"
      R"("model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":)";
  std::vector<std::string> pieces;
  pieces.push_back(head + R"({"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]})" "\n\n");
  for (int i = 0; i < 32; ++i) {
    pieces.push_back(head + R"({"content":" word)" + std::to_string(i) +
                     R"("},"logprobs":null,"finish_reason":null}]})" "\n\n");
  }
  pieces.push_back("data: [DONE]\n\n");
  return pieces;
}

void BM_SseTokenCounter(benchmark::State& state) {
  const auto pieces = ChatStream();
  for (auto _ : state) {
    SseTokenCounter counter;
    std::uint32_t tokens = 0;
    for (const auto& p : pieces) tokens += counter.Feed(p).tokens;
    benchmark::DoNotOptimize(tokens);
  }
}
BENCHMARK(BM_SseTokenCounter);

void BM_StreamedText(benchmark::State& state) {
  const auto pieces = ChatStream();
  for (auto _ : state) {
    StreamedText text(api::Endpoint::kChatCompletions);
    for (const auto& p : pieces) text.Feed(p);
    benchmark::DoNotOptimize(text.tokens());
  }
}
BENCHMARK(BM_StreamedText);

}  // namespace
}  // namespace kvroute::gateway

BENCHMARK_MAIN();

// Micro-benchmarks of the request-path costs src/api/ adds per request: parsing a chat body,
// encoding a stream delta, and parsing SSE bytes (the gateway's relay and the bench client).
//   ninja -C build/<dir> kvroute_api_bench && build/<dir>/src/api/kvroute_api_bench
#include <benchmark/benchmark.h>

#include <boost/json/serialize.hpp>
#include <string>

#include "api/chat_request.h"
#include "api/sse_parser.h"
#include "api/stream_chunks.h"

namespace kvroute::api {
namespace {

// A multi-turn agentic conversation: `turns` user/assistant pairs of ~400 bytes each.
std::string ChatBody(int turns) {
  boost::json::array messages;
  messages.push_back({{"role", "system"}, {"content", std::string(2000, 's')}});
  for (int i = 0; i < turns; ++i) {
    messages.push_back({{"role", "user"}, {"content", std::string(400, 'u')}});
    messages.push_back({{"role", "assistant"}, {"content", std::string(400, 'a')}});
  }
  messages.push_back({{"role", "user"}, {"content", "next?"}});
  boost::json::object body{{"model", "m"}, {"stream", true}, {"max_completion_tokens", 256}};
  body["messages"] = std::move(messages);
  return boost::json::serialize(body);
}

void BM_ParseChatCompletionRequest(benchmark::State& state) {
  const std::string body = ChatBody(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    auto r = ParseChatCompletionRequest(body);
    benchmark::DoNotOptimize(r);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * body.size()));
}
BENCHMARK(BM_ParseChatCompletionRequest)->Arg(1)->Arg(10)->Arg(50);

void BM_StreamEncoderDelta(benchmark::State& state) {
  StreamEncoder enc(Endpoint::kChatCompletions,
                    ResponseMeta{.id = "chatcmpl-0123456789abcdef0123456789abcdef",
                                 .created = 1700000000,
                                 .model = "meta-llama/Llama-3.1-8B-Instruct"},
                    StreamOptions{}, 1000);
  std::int64_t n = 0;
  for (auto _ : state) {
    std::string frame = enc.Delta(" token", ++n);
    benchmark::DoNotOptimize(frame);
  }
}
BENCHMARK(BM_StreamEncoderDelta);

void BM_SseParserFeed(benchmark::State& state) {
  StreamEncoder enc(Endpoint::kChatCompletions,
                    ResponseMeta{.id = "chatcmpl-x", .created = 1, .model = "m"}, StreamOptions{},
                    10);
  std::string stream = enc.Start();
  for (int i = 0; i < 256; ++i) stream += enc.Delta(" token", i + 1);
  stream += enc.End("", 257, Finish{}, std::nullopt);
  const std::size_t piece = static_cast<std::size_t>(state.range(0));
  std::vector<SseMessage> events;
  for (auto _ : state) {
    SseParser parser;
    events.clear();
    for (std::size_t pos = 0; pos < stream.size(); pos += piece) {
      (void)parser.Feed(std::string_view(stream).substr(pos, piece), events);
    }
    benchmark::DoNotOptimize(events);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * stream.size()));
}
BENCHMARK(BM_SseParserFeed)->Arg(64)->Arg(1460)->Arg(16384);

}  // namespace
}  // namespace kvroute::api

BENCHMARK_MAIN();

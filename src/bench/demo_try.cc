#include "bench/demo_try.h"

#include <boost/json.hpp>

namespace kvroute::bench {
namespace {

// Single-quoted for the shell ('\'' for a quote inside).
std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

std::string CacheProbeBody(const std::string& model) {
  std::string system =
      "You are the assistant of the kvroute demo. kvroute routes each request to the worker "
      "whose KV cache already holds the longest prefix of its prompt, so a prompt that starts "
      "like an earlier one skips recomputing that part. ";
  const std::string line =
      "Answer briefly, state your assumptions, and say when a question cannot be answered "
      "from what you were told. ";
  while (system.size() < 4000) system += line;
  boost::json::object body{
      {"model", model},
      {"max_tokens", 16},
      {"messages",
       boost::json::array{boost::json::object{{"role", "system"}, {"content", system}},
                          boost::json::object{{"role", "user"}, {"content", "Hello!"}}}}};
  return boost::json::serialize(body) + "\n";
}

std::string TryItText(const std::string& url, const std::string& model,
                      const std::string& probe_file) {
  const std::string json = "-H 'Content-Type: application/json'";
  const std::string hello = Quote(
      R"({"model": ")" + model +
      R"(", "stream": true, "max_tokens": 32, "messages": [{"role": "user", "content": "Hello!"}]})");
  std::string out;
  out +=
      "  # Cache-aware routing: the same chat request twice. Each answer names the worker\n"
      "  # kvroute chose (x-kvroute-worker) and the prompt tokens that worker found in its KV\n"
      "  # cache (cached_tokens): 0 the first time, nearly all of the prompt the second time,\n"
      "  # on the same worker.\n";
  out += "  for i in 1 2; do curl -s -i " + url + "/v1/chat/completions " + json + " -d @" +
         Quote(probe_file) +
         " | grep -Eio 'x-kvroute-worker: [^[:space:]]+|\"cached_tokens\":[0-9]+'; done\n\n";
  out += "  # The decision for that request, every worker's score, without sending it anywhere:\n";
  out += "  curl -s -X POST " + url + "/debug/route " + json + " -d @" + Quote(probe_file) + "\n\n";
  out += "  # A streamed answer (OpenAI's chat API; the sims answer with filler text):\n";
  out += "  curl -N " + url + "/v1/chat/completions " + json + " -d " + hello + "\n\n";
  out += "  # The router's Prometheus metrics:\n";
  out += "  curl -s " + url + "/metrics | grep '^kvroute_'\n";
  return out;
}

}  // namespace kvroute::bench

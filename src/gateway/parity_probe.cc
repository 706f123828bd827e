#include "gateway/parity_probe.h"

#include <boost/json.hpp>
#include <thread>

#include "client/blocking_http_client.h"

namespace kvroute::gateway {
namespace {

// Text that exercises what tokenizers disagree on: case, digits, punctuation, whitespace
// runs, accents and CJK.
constexpr std::string_view kProbeText =
    "kvroute parity probe: The quick brown fox jumps over 13 lazy dogs!  Ünïcödé naïveté, "
    "日本語のテキスト, tabs\tand\nnew lines; price $4.99 (approx.) — done.";

tokenize::ChatRequest ProbeChat() {
  tokenize::ChatRequest chat;
  chat.messages.push_back({.role = "system", .content = "You are a parity probe."});
  chat.messages.push_back({.role = "user", .content = std::string(kProbeText)});
  return chat;
}

boost::json::array ProbeChatJson() {
  boost::json::array messages;
  for (const auto& m : ProbeChat().messages) {
    messages.push_back(boost::json::object{{"role", m.role}, {"content", m.content}});
  }
  return messages;
}

// The "tokens" list of a /tokenize answer; nullopt when the answer is not one.
std::optional<std::vector<TokenId>> TokensOf(const std::string& body) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(body, ec);
  if (ec || !v.is_object()) return std::nullopt;
  const boost::json::value* tokens = v.as_object().if_contains("tokens");
  if (tokens == nullptr || !tokens->is_array()) return std::nullopt;
  std::vector<TokenId> out;
  for (const auto& t : tokens->as_array()) {
    if (!t.is_int64() && !t.is_uint64()) return std::nullopt;
    out.push_back(static_cast<TokenId>(t.to_number<std::int64_t>()));
  }
  return out;
}

// Where two token lists first differ, for the message.
std::string FirstDifference(const std::vector<TokenId>& ours, const std::vector<TokenId>& theirs) {
  std::size_t i = 0;
  while (i < ours.size() && i < theirs.size() && ours[i] == theirs[i]) ++i;
  return "first difference at token " + std::to_string(i) + " of " + std::to_string(ours.size()) +
         " (kvroute) / " + std::to_string(theirs.size()) + " (worker)";
}

ProbeFinding Finding(const ParityTarget& w, std::string_view setting, std::string message) {
  return {.worker = w.id,
          .setting = std::string(setting),
          .message = "worker " + w.name + ": " + std::string(setting) + " mismatch: " + message};
}

// One /tokenize comparison; nothing when the worker has no /tokenize or answers oddly.
std::optional<ProbeFinding> CompareTokenize(const ParityTarget& w, const ParityProbeDeps& d,
                                            std::string_view setting, boost::json::object body,
                                            const std::vector<TokenId>& ours) {
  body["model"] = w.model;
  auto reply = d.http(w.base_url + "/tokenize", boost::json::serialize(body));
  if (!reply || reply->status != 200) return std::nullopt;
  auto theirs = TokensOf(reply->body);
  if (!theirs || *theirs == ours) return std::nullopt;
  return Finding(w, setting,
                 std::string(setting == "tokenizer" ? "the probe text" : "the probe chat") +
                     " tokenizes differently (" + FirstDifference(ours, *theirs) +
                     "); set tokenizer.model_dir to the engine's model");
}

std::optional<ProbeFinding> HashProbe(const ParityTarget& w, const ParityProbeDeps& d) {
  // At least two full blocks of ids kvroute's tokenizer produces (ids the engine accepts),
  // led by the nonce so this start's probe is new to the engine's cache.
  std::vector<TokenId> tokens = d.tokenizer->Encode(
      "kvroute parity probe " + std::to_string(d.nonce) + " for " + w.name + ": ", false);
  const std::vector<TokenId> filler = d.tokenizer->Encode(kProbeText, false);
  while (tokens.size() < 2 * std::size_t{d.block_size} + 1 && !filler.empty()) {
    tokens.insert(tokens.end(), filler.begin(), filler.end());
  }
  const std::vector<kv::BlockKey> keys = d.index->keyer().Keys(tokens);
  if (keys.empty()) return std::nullopt;
  const std::uint64_t batches_before = d.event_batches ? d.event_batches(w.id) : 0;
  boost::json::array prompt;
  for (TokenId t : tokens) prompt.push_back(t);
  boost::json::object body{{"model", w.model}, {"prompt", std::move(prompt)}, {"max_tokens", 1}};
  auto reply = d.http(w.base_url + "/v1/completions", boost::json::serialize(body));
  if (!reply || reply->status != 200) return std::nullopt;  // health checks report that
  auto depth = [&] {
    for (const auto& m : d.index->Lookup(keys)) {
      if (m.worker == w.id) return m.any_depth;
    }
    return std::uint32_t{0};
  };
  const auto step = std::chrono::milliseconds(20);
  for (auto waited = std::chrono::milliseconds(0); waited <= d.timeout; waited += step) {
    if (depth() > 0) return std::nullopt;
    d.sleep ? d.sleep(step) : std::this_thread::sleep_for(step);
  }
  const bool events = d.event_batches && d.event_batches(w.id) > batches_before;
  if (!events) {
    return Finding(w, "kv_events",
                   "no KV event arrived within " + std::to_string(d.timeout.count()) +
                       " ms of a completion; check its kv_events endpoint and that the engine "
                       "runs with --kv-events-config (enable_kv_cache_events)");
  }
  return Finding(w, "hash",
                 "the engine stored the probe prompt but kvroute's key for its first block "
                 "is not among the blocks its events named (block size, token ids or extra "
                 "keys differ from the engine's)");
}

}  // namespace

std::vector<ProbeFinding> ProbeWorker(const ParityTarget& w, const ParityProbeDeps& d) {
  std::vector<ProbeFinding> out;
  if (w.block_size && *w.block_size != d.block_size) {
    out.push_back(Finding(w, "block_size",
                          "the engine's cache_config_info says block_size " +
                              std::to_string(*w.block_size) + " but kvroute keys blocks of " +
                              std::to_string(d.block_size) +
                              " tokens; set block_size to the engines' value"));
  }
  if (d.tokenizer == nullptr || !d.http) return out;
  if (auto f =
          CompareTokenize(w, d, "tokenizer", {{"prompt", kProbeText}, {"add_special_tokens", true}},
                          d.tokenizer->Encode(kProbeText, true))) {
    out.push_back(std::move(*f));
  }
  if (auto ours = d.tokenizer->EncodeChat(ProbeChat())) {
    if (auto f = CompareTokenize(w, d, "chat_template",
                                 {{"messages", ProbeChatJson()}, {"add_generation_prompt", true}},
                                 *ours)) {
      out.push_back(std::move(*f));
    }
  }
  const bool block_size_differs = !out.empty();  // the hash probe would only repeat it
  if (d.index != nullptr && w.kv_events && !block_size_differs) {
    if (auto f = HashProbe(w, d)) out.push_back(std::move(*f));
  }
  return out;
}

std::vector<ProbeFinding> ProbeWorkers(const std::vector<ParityTarget>& targets,
                                       const ParityProbeDeps& deps) {
  std::vector<std::vector<ProbeFinding>> found(targets.size());
  std::vector<std::thread> threads;
  threads.reserve(targets.size());
  for (std::size_t i = 0; i < targets.size(); ++i) {
    threads.emplace_back([&, i] {
      client::BlockingHttpClient http;
      ParityProbeDeps d = deps;
      const auto limit = std::max(deps.timeout, std::chrono::milliseconds(500));
      d.http = [&http, limit](const std::string& url,
                              const std::string& body) -> std::expected<HttpReply, std::string> {
        auto req = client::MakeRequest("POST", url, body, "application/json");
        if (!req) return std::unexpected(req.error());
        req->timeouts = client::Timeouts{
            .connect = limit, .first_byte = limit, .idle = limit, .total = limit * 2};
        auto res = http.Send(std::move(*req));
        if (!res) return std::unexpected(res.error().text);
        return HttpReply{.status = res->status, .body = std::move(res->body)};
      };
      found[i] = ProbeWorker(targets[i], d);
    });
  }
  for (auto& t : threads) t.join();
  std::vector<ProbeFinding> out;
  for (auto& f : found) out.insert(out.end(), f.begin(), f.end());
  return out;
}

}  // namespace kvroute::gateway

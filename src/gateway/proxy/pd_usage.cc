#include "gateway/proxy/pd_usage.h"

#include <boost/json.hpp>

namespace kvroute::gateway {

namespace {

// Sets usage.prompt_tokens_details.cached_tokens in `root`; false when it has no usage object.
bool SetCachedTokens(boost::json::object& root, std::uint64_t cached_tokens) {
  boost::json::value* usage = root.if_contains("usage");
  if (usage == nullptr || !usage->is_object()) return false;
  boost::json::value& details = usage->as_object()["prompt_tokens_details"];
  if (!details.is_object()) details = boost::json::object{};
  details.as_object()["cached_tokens"] = cached_tokens;
  return true;
}

}  // namespace

std::optional<std::uint64_t> CachedTokensOf(std::string_view prefill_answer) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(prefill_answer, ec);
  if (ec || !v.is_object()) return std::nullopt;
  const boost::json::value* usage = v.as_object().if_contains("usage");
  if (usage == nullptr || !usage->is_object()) return std::nullopt;
  const boost::json::value* details = usage->as_object().if_contains("prompt_tokens_details");
  if (details == nullptr || !details->is_object()) return 0;
  const boost::json::value* cached = details->as_object().if_contains("cached_tokens");
  if (cached == nullptr) return 0;
  if (cached->is_uint64()) return cached->as_uint64();
  if (cached->is_int64() && cached->as_int64() >= 0) {
    return static_cast<std::uint64_t>(cached->as_int64());
  }
  return 0;
}

std::string MergePrefillUsage(std::string_view decode_answer, std::uint64_t cached_tokens) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(decode_answer, ec);
  if (ec || !v.is_object() || !SetCachedTokens(v.as_object(), cached_tokens)) {
    return std::string(decode_answer);
  }
  return boost::json::serialize(v);
}

std::string SseUsageRewriter::RewriteEvent(std::string_view event) const {
  // Cheap test first: token events (the vast majority) carry "usage":null or no usage.
  const std::size_t at = event.find("\"usage\"");
  if (at == std::string_view::npos) return std::string(event);
  std::string_view after = event.substr(at + 7);
  while (!after.empty() && (after.front() == ' ' || after.front() == ':')) after.remove_prefix(1);
  if (after.empty() || after.front() != '{') return std::string(event);
  // One `data:` line per event (what vLLM and kvroute sim send); other shapes pass unchanged.
  constexpr std::string_view kData = "data:";
  std::size_t line = event.find(kData);
  if (line == std::string_view::npos) return std::string(event);
  std::size_t json_start = line + kData.size();
  if (json_start < event.size() && event[json_start] == ' ') ++json_start;
  std::size_t json_end = event.find('\n', json_start);
  if (json_end == std::string_view::npos) json_end = event.size();
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(event.substr(json_start, json_end - json_start), ec);
  if (ec || !v.is_object() || !SetCachedTokens(v.as_object(), cached_tokens_)) {
    return std::string(event);
  }
  std::string out(event.substr(0, json_start));
  out += boost::json::serialize(v);
  out += event.substr(json_end);
  return out;
}

std::string SseUsageRewriter::Feed(std::string_view piece) {
  held_.append(piece);
  const std::size_t last = held_.rfind("\n\n");
  if (last == std::string::npos) return {};
  std::string out;
  std::string_view done(held_.data(), last + 2);
  std::size_t pos = 0;
  while (pos < done.size()) {
    std::size_t end = done.find("\n\n", pos);
    end = end == std::string_view::npos ? done.size() : end + 2;
    out += RewriteEvent(done.substr(pos, end - pos));
    pos = end;
  }
  held_.erase(0, last + 2);
  return out;
}

std::string SseUsageRewriter::Finish() {
  std::string out = std::move(held_);
  held_.clear();
  return out;
}

}  // namespace kvroute::gateway

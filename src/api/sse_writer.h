// Server-Sent Events framing for the OpenAI stream: `data: <payload>\n\n` per event and the
// `data: [DONE]\n\n` terminator. A payload containing newlines is split over several `data:`
// lines, which an SSE reader joins back with "\n".
//
// Thread safety: pure functions.
#pragma once

#include <boost/json/object.hpp>
#include <string>
#include <string_view>

namespace kvroute::api {

inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";
inline constexpr std::string_view kSseContentType = "text/event-stream";

// "data: <payload>\n\n" (with an "event: <name>\n" line first when `event` is not empty,
// as the Anthropic Messages stream needs).
std::string SseEvent(std::string_view payload, std::string_view event = {});
// SseEvent(serialize(json)).
std::string SseJson(const boost::json::object& json, std::string_view event = {});

}  // namespace kvroute::api

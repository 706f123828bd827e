#include "api/sse_writer.h"

#include <boost/json/serialize.hpp>

namespace kvroute::api {

std::string SseEvent(std::string_view payload, std::string_view event) {
  std::string out;
  out.reserve(payload.size() + event.size() + 16);
  if (!event.empty()) {
    out += "event: ";
    out += event;
    out += '\n';
  }
  // One "data:" line per payload line; a reader joins them back with "\n".
  std::size_t start = 0;
  while (true) {
    const std::size_t nl = payload.find('\n', start);
    out += "data: ";
    out +=
        payload.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start);
    out += '\n';
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  out += '\n';
  return out;
}

std::string SseJson(const boost::json::object& json, std::string_view event) {
  // serialize() never emits a raw newline (control characters inside strings are escaped),
  // so this is always a single data line.
  return SseEvent(boost::json::serialize(json), event);
}

}  // namespace kvroute::api

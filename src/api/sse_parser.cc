#include "api/sse_parser.h"

#include <cstring>
#include <utility>

namespace kvroute::api {

// string_view::find_first_of with a two-byte needle calls memchr over the needle once per
// haystack byte (libstdc++), a call per relayed byte; two memchr over the haystack (the '\r'
// one only up to the '\n') scan each byte at most twice, vectorised.
std::size_t FindSseLineEnd(std::string_view bytes, std::size_t from) {
  const char* begin = bytes.data() + from;
  const std::size_t n = bytes.size() - from;
  const void* lf = std::memchr(begin, '\n', n);
  const std::size_t lf_at = lf ? static_cast<std::size_t>(static_cast<const char*>(lf) - begin) : n;
  const void* cr = std::memchr(begin, '\r', lf_at);
  if (cr) return from + static_cast<std::size_t>(static_cast<const char*>(cr) - begin);
  return lf ? from + lf_at : std::string_view::npos;
}

SseParser::SseParser(std::size_t max_event_bytes) : max_event_bytes_(max_event_bytes) {}

bool SseParser::HasPartialEvent() const { return !line_.empty() || has_data_ || !event_.empty(); }

std::expected<void, SseError> SseParser::Feed(std::string_view bytes,
                                              std::vector<SseMessage>& out) {
  if (failed_) return std::unexpected(SseError::kEventTooLarge);
  std::size_t i = 0;
  while (i < bytes.size()) {
    if (skip_lf_) {
      skip_lf_ = false;
      if (bytes[i] == '\n') {
        ++i;
        continue;
      }
    }
    // Copy the run of ordinary bytes up to the next line end in one step.
    const std::size_t end = FindSseLineEnd(bytes, i);
    const std::size_t run_end = end == std::string_view::npos ? bytes.size() : end;
    if (line_.size() + data_.size() + event_.size() + (run_end - i) > max_event_bytes_) {
      failed_ = true;
      return std::unexpected(SseError::kEventTooLarge);
    }
    line_.append(bytes.substr(i, run_end - i));
    i = run_end;
    if (i == bytes.size()) break;
    skip_lf_ = bytes[i] == '\r';
    ++i;
    ProcessLine(out);
  }
  return {};
}

void SseParser::ProcessLine(std::vector<SseMessage>& out) {
  // line_ is cleared on every path out, so the next line starts empty.
  struct ClearLine {
    std::string& line;
    ~ClearLine() { line.clear(); }
  } clear{line_};
  if (line_.empty()) {
    Dispatch(out);
    return;
  }
  if (line_.front() == ':') return;  // comment (keep-alive pings)
  std::string_view field = line_;
  std::string_view value;
  if (const std::size_t colon = field.find(':'); colon != std::string_view::npos) {
    value = field.substr(colon + 1);
    field = field.substr(0, colon);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    if (has_data_) data_ += '\n';
    data_ += value;
    has_data_ = true;
  } else if (field == "event") {
    event_ = value;
  } else if (field == "id") {
    // The spec ignores ids containing NUL.
    if (value.find('\0') == std::string_view::npos) id_ = value;
  }
  // "retry" and unknown fields are ignored: nothing here reconnects.
}

void SseParser::Dispatch(std::vector<SseMessage>& out) {
  if (has_data_) {
    SseMessage message;
    message.event = std::move(event_);
    message.data = std::move(data_);
    message.id = id_;  // the last event id persists across events (spec)
    message.done = message.data == "[DONE]";
    out.push_back(std::move(message));
  }
  data_.clear();
  event_.clear();
  has_data_ = false;
}

}  // namespace kvroute::api

// SseParser: an incremental Server-Sent Events reader (WHATWG event-stream rules) for the
// gateway's stream relay and the bench client.
//
// Feed it bytes in pieces of any size; it returns the events completed so far. Lines end in
// "\n", "\r\n" or "\r" (a "\r" at the end of one piece followed by "\n" at the start of the
// next is one line end). "data:" lines of one event are joined with "\n"; lines starting with
// ":" are comments; "event:", "id:" and "retry:" are recorded; a blank line dispatches the
// event (an event with no data line is dropped, as browsers do). `data: [DONE]` is flagged
// `done`.
//
// Bounded: the bytes held for one unfinished event never exceed `max_event_bytes`; past that
// the parser enters a sticky error state (Feed returns kEventTooLarge) — the caller should
// drop the stream.
//
// Thread safety: none; one parser per stream.
#pragma once

#include <cstddef>
#include <expected>
#include <string>
#include <string_view>
#include <vector>

namespace kvroute::api {

struct SseMessage {
  std::string event;  // "" when the event had no "event:" line (the type is then "message")
  std::string data;
  std::string id;
  bool done = false;  // data == "[DONE]", OpenAI's end-of-stream sentinel

  bool operator==(const SseMessage&) const = default;
};

enum class SseError { kEventTooLarge };

// Index of the first '\r' or '\n' in bytes[from, size), or npos: an SSE line end. Shared by
// SseParser and the proxy's token counter (gateway/proxy_sse_count), the two relay-path scans.
std::size_t FindSseLineEnd(std::string_view bytes, std::size_t from);

class SseParser {
 public:
  static constexpr std::size_t kDefaultMaxEventBytes = 4 << 20;

  explicit SseParser(std::size_t max_event_bytes = kDefaultMaxEventBytes);

  // Consumes `bytes`, appends completed events to `out`. After an error every call fails.
  std::expected<void, SseError> Feed(std::string_view bytes, std::vector<SseMessage>& out);

  // True when bytes of an unfinished event are held (a stream that ends here was cut).
  bool HasPartialEvent() const;

 private:
  void ProcessLine(std::vector<SseMessage>& out);
  void Dispatch(std::vector<SseMessage>& out);

  std::size_t max_event_bytes_;
  std::string line_;       // the current, unterminated line
  std::string data_;       // data lines of the current event, joined with "\n"
  bool has_data_ = false;  // at least one data line seen (data may be empty)
  std::string event_;
  std::string id_;
  bool skip_lf_ = false;  // the last byte was "\r": a following "\n" is the same line end
  bool failed_ = false;
};

}  // namespace kvroute::api

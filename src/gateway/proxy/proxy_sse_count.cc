#include "gateway/proxy/proxy_sse_count.h"

#include <cstring>

#include "api/sse_parser.h"

namespace kvroute::gateway {
namespace {

// Whether `data` contains "choices":[] — found from its '[' characters (one or two in a
// chunk, located by memchr) rather than by a general substring search (glibc memmem cost
// ~430 instructions per chunk here, more than the rest of the scan).
bool HasEmptyChoices(std::string_view data) {
  constexpr std::string_view kKey = "\"choices\":";
  std::size_t from = 0;
  while (from < data.size()) {
    const void* hit = std::memchr(data.data() + from, '[', data.size() - from);
    if (hit == nullptr) return false;
    const std::size_t at = static_cast<std::size_t>(static_cast<const char*>(hit) - data.data());
    if (at + 1 < data.size() && data[at + 1] == ']' && at >= kKey.size() &&
        data.substr(at - kKey.size(), kKey.size()) == kKey) {
      return true;
    }
    from = at + 1;
  }
  return false;
}

}  // namespace

SseTokenCounter::Counts SseTokenCounter::Feed(std::string_view bytes) {
  Counts counts;
  if (failed_) return counts;
  std::size_t i = 0;
  while (i < bytes.size()) {
    if (skip_lf_) {
      skip_lf_ = false;
      if (bytes[i] == '\n') {
        ++i;
        continue;
      }
    }
    const std::size_t end = api::FindSseLineEnd(bytes, i);
    if (end == std::string_view::npos) {  // the line continues in the next piece
      if (partial_.size() + (bytes.size() - i) > kMaxLineBytes) {
        failed_ = true;
        partial_.clear();
        return Counts{};
      }
      partial_.append(bytes.substr(i));
      break;
    }
    skip_lf_ = bytes[end] == '\r';
    if (partial_.empty()) {
      Line(bytes.substr(i, end - i), counts);
    } else {
      partial_.append(bytes.substr(i, end - i));
      Line(partial_, counts);
      partial_.clear();
    }
    i = end + 1;
  }
  return counts;
}

void SseTokenCounter::Line(std::string_view line, Counts& counts) {
  if (line.empty()) {  // the event ends
    if (has_data_ && done_) counts.done = true;
    if (has_data_ && !done_) {
      if (error_) {
        counts.error = true;
      } else if (!usage_only_) {
        ++counts.tokens;
      }
    }
    has_data_ = done_ = error_ = usage_only_ = false;
    return;
  }
  if (!line.starts_with("data")) return;  // comments and other fields
  std::string_view value = line.substr(4);
  if (!value.empty()) {
    if (value.front() != ':') return;  // another field whose name starts with "data"
    value.remove_prefix(1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (!has_data_) {
    has_data_ = true;
    done_ = value == "[DONE]";
    error_ = value.starts_with("{\"error\"");
  } else {
    done_ = false;  // the joined data is no longer exactly [DONE]
  }
  if (!usage_only_ && HasEmptyChoices(value)) usage_only_ = true;
}

}  // namespace kvroute::gateway

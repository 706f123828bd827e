#include "k8s/list_watch.h"

#include <algorithm>
#include <cctype>

namespace kvroute::k8s {

std::string UrlEncode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

bool ListWatchLoop::Wait(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  return !cv_.wait_for(lock, d, [this] { return stop_; });
}

bool ListWatchLoop::Stopped() {
  std::lock_guard lock(mu_);
  return stop_;
}

void ListWatchLoop::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    if (open_stream_) open_stream_->Cancel();
  }
  cv_.notify_all();
}

std::chrono::milliseconds ListWatchLoop::NextBackoff() {
  const auto d = backoff_;
  backoff_ = std::min(backoff_ * 2, options_.max_backoff);
  return d;
}

std::expected<std::string, std::string> ListWatchLoop::Get(const std::string& target, bool* not_found) {
  if (not_found) *not_found = false;
  auto r = api_->Get(target);
  if (!r) return std::unexpected(r.error());
  if (r->status == 404 && not_found) *not_found = true;
  if (r->status != 200) return std::unexpected("HTTP " + std::to_string(r->status) + ": " + r->body.substr(0, 200));
  return r->body;
}

ListWatchLoop::WatchEnd ListWatchLoop::Watch(WatchReconciler& rec, const std::string& collection) {
  const char* sep = collection.find('?') == std::string::npos ? "?" : "&";
  const std::string target = collection + sep + "watch=true&allowWatchBookmarks=true&resourceVersion=" +
                             UrlEncode(rec.resource_version()) +
                             "&timeoutSeconds=" + std::to_string(options_.watch_timeout_s);
  Step("watch rv=" + rec.resource_version());
  auto stream = api_->Watch(target);
  if (!stream) {
    Failure("watch failed: " + stream.error());
    return WatchEnd::kFailed;
  }
  if ((*stream)->status() == 410) {
    Step("gone (HTTP 410)");
    return WatchEnd::kRelist;
  }
  if ((*stream)->status() != 200) {
    Failure("watch failed: HTTP " + std::to_string((*stream)->status()));
    return WatchEnd::kFailed;
  }
  {
    std::lock_guard lock(mu_);
    if (stop_) return WatchEnd::kFailed;
    open_stream_ = stream->get();
  }
  // A watch may be quiet for its whole timeoutSeconds (bookmarks come about once a minute).
  const std::chrono::milliseconds idle = std::chrono::seconds(options_.watch_timeout_s + 30);
  std::string buffer;
  WatchEnd end = WatchEnd::kResume;
  for (bool more = true; more;) {
    auto piece = (*stream)->Next(idle);
    if (!piece || !*piece) {
      Step(piece ? "watch ended" : "dropped: " + piece.error());
      break;
    }
    buffer += **piece;
    std::size_t start = 0;
    for (std::size_t nl; (nl = buffer.find('\n', start)) != std::string::npos; start = nl + 1) {
      std::string_view line(buffer.data() + start, nl - start);
      if (line.empty()) continue;
      WatchReconciler::Event e = rec.ApplyEvent(line);
      if (e == WatchReconciler::Event::kGone) {
        Step("gone (ERROR 410)");
        end = WatchEnd::kRelist;
        more = false;
        break;
      }
      if (e == WatchReconciler::Event::kBookmark) Step("bookmark rv=" + rec.resource_version());
      if (e == WatchReconciler::Event::kError) Step("watch error event");
    }
    buffer.erase(0, start);
  }
  std::lock_guard lock(mu_);
  open_stream_ = nullptr;
  return end;
}

void ListWatchLoop::Run(WatchReconciler& rec, const std::string& collection) {
  bool need_list = true;
  while (!Stopped()) {
    if (need_list) {
      bool not_found = false;
      auto body = Get(collection, &not_found);
      if (!body && not_found && options_.not_found_backoff.count() > 0) {
        // Not served (a CRD not installed, or removed): nothing of it exists.
        if (!rec.Members().empty()) (void)rec.ApplyList(R"({"metadata":{"resourceVersion":""},"items":[]})");
        Step("not found: " + collection);
        if (!Wait(options_.not_found_backoff)) return;
        continue;
      }
      auto rv = body ? rec.ApplyList(*body) : std::unexpected(body.error());
      if (!rv) {
        Failure("list error: " + rv.error());
        if (!Wait(NextBackoff())) return;
        continue;
      }
      Step("list rv=" + *rv);
      need_list = false;
    }
    switch (Watch(rec, collection)) {
      case WatchEnd::kResume:
        ResetBackoff();
        break;
      case WatchEnd::kRelist:
        need_list = true;
        ResetBackoff();
        break;
      case WatchEnd::kFailed:
        if (!Wait(NextBackoff())) return;
        break;
    }
  }
}

}  // namespace kvroute::k8s

#include "etcd/client.h"

#include "client/blocking_http_client.h"

namespace kvroute::etcd {
namespace {

bool IsConnectFailure(const client::ClientError& e) {
  return e.kind == client::ErrorKind::kConnectRefused ||
         e.kind == client::ErrorKind::kConnectTimeout;
}

Error FromClient(const client::ClientError& e, const client::Url& url) {
  return Error{Error::Kind::kUnavailable, url.Origin() + ": " +
                                              std::string(client::ErrorKindName(e.kind)) + " " +
                                              e.text};
}

Error FromStatus(int status, std::string_view body) {
  Error e;
  e.text = "HTTP " + std::to_string(status) + ": " + ErrorText(body);
  if (status == 404) {
    e.kind = Error::Kind::kNotFound;
  } else if (status >= 500) {
    e.kind = Error::Kind::kUnavailable;  // e.g. no leader while the cluster elects one
  } else {
    e.kind = Error::Kind::kRejected;
  }
  return e;
}

Error Protocol(std::string text) { return Error{Error::Kind::kProtocol, std::move(text)}; }

}  // namespace

std::string_view ErrorKindName(Error::Kind kind) {
  switch (kind) {
    case Error::Kind::kUnavailable: return "unavailable";
    case Error::Kind::kNotFound: return "not_found";
    case Error::Kind::kRejected: return "rejected";
    case Error::Kind::kProtocol: return "protocol";
    case Error::Kind::kIdle: return "idle";
  }
  return "?";
}

std::expected<std::vector<client::Url>, std::string> ParseEndpoints(std::string_view list) {
  std::vector<client::Url> out;
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    std::string_view one = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    while (!one.empty() && one.front() == ' ') one.remove_prefix(1);
    while (!one.empty() && one.back() == ' ') one.remove_suffix(1);
    if (one.empty()) continue;
    std::string text(one);
    if (text.find("://") == std::string::npos) text = "http://" + text;
    auto url = client::ParseUrl(text);
    if (!url) return std::unexpected("etcd endpoint '" + std::string(one) + "': " + url.error());
    if (url->target != "/") {
      return std::unexpected("etcd endpoint '" + std::string(one) + "': no path expected");
    }
    out.push_back(std::move(*url));
  }
  if (out.empty()) return std::unexpected("no etcd endpoint");
  return out;
}

Watch::Watch(std::unique_ptr<client::BlockingStream> stream) : stream_(std::move(stream)) {}
Watch::~Watch() = default;
void Watch::Cancel() { stream_->Cancel(); }

Result<WatchMessage> Watch::Next() {
  for (;;) {
    if (const std::size_t nl = buffer_.find('\n'); nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      if (line.find_first_not_of(" \r\t") == std::string::npos) continue;
      auto m = ParseWatchMessage(line);
      if (!m) return std::unexpected(Protocol("watch: " + m.error()));
      return std::move(*m);
    }
    auto piece = stream_->Next();
    if (!piece && piece.error().kind == client::ErrorKind::kIdleTimeout) {
      return std::unexpected(Error{Error::Kind::kIdle, "watch: idle"});
    }
    if (!piece) {
      return std::unexpected(Error{Error::Kind::kUnavailable,
                                   "watch: " + std::string(client::ErrorKindName(piece.error().kind)) +
                                       " " + piece.error().text});
    }
    if (!*piece) return std::unexpected(Error{Error::Kind::kUnavailable, "watch: stream ended"});
    buffer_ += **piece;
  }
}

EtcdClient::EtcdClient(ClientOptions options)
    : options_(std::move(options)), http_(std::make_unique<client::BlockingHttpClient>()) {}
EtcdClient::~EtcdClient() = default;

std::string EtcdClient::CurrentEndpoint() const {
  if (options_.endpoints.empty()) return {};
  return options_.endpoints[preferred_.load() % options_.endpoints.size()].Origin();
}

client::ClientRequest EtcdClient::RequestTo(const client::Url& url, std::string_view path,
                                            std::string body) const {
  client::ClientRequest req;
  req.method = "POST";
  req.host = url.host;
  req.port = url.port;
  req.target = std::string(path);
  req.body = std::move(body);
  req.content_type = "application/json";
  req.timeouts = client::Timeouts{.connect = options_.connect_timeout,
                                  .first_byte = options_.call_timeout,
                                  .idle = options_.call_timeout,
                                  .total = options_.call_timeout};
  return req;
}

// Tries the preferred endpoint, then the others, moving on only when a connect failed (a
// request that reached etcd and timed out may have been applied; the caller decides).
Result<std::string> EtcdClient::Call(std::string_view path, std::string body) {
  const std::size_t n = options_.endpoints.size();
  if (n == 0) return std::unexpected(Error{Error::Kind::kUnavailable, "no etcd endpoint"});
  const std::size_t first = preferred_.load();
  Error last;
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t i = (first + k) % n;
    const client::Url& url = options_.endpoints[i];
    auto res = http_->Send(RequestTo(url, path, body));
    if (!res) {
      last = FromClient(res.error(), url);
      if (IsConnectFailure(res.error())) continue;
      return std::unexpected(last);
    }
    preferred_.store(i);
    if (res->status != 200) return std::unexpected(FromStatus(res->status, res->body));
    return std::move(res->body);
  }
  return std::unexpected(last);
}

Result<LeaseGrant> EtcdClient::GrantLease(std::int64_t ttl_s) {
  auto body = Call("/v3/lease/grant", "{\"TTL\":\"" + std::to_string(ttl_s) + "\"}");
  if (!body) return std::unexpected(body.error());
  auto g = ParseLeaseGrant(*body);
  if (!g) return std::unexpected(Protocol("lease grant: " + g.error()));
  return *g;
}

Result<std::int64_t> EtcdClient::KeepAliveOnce(std::int64_t lease) {
  // A client-stream endpoint used one-shot: one request line, one answer line, then closed.
  auto body = Call("/v3/lease/keepalive", "{\"ID\":\"" + std::to_string(lease) + "\"}");
  if (!body) return std::unexpected(body.error());
  auto ttl = ParseKeepAlive(*body);
  if (!ttl) return std::unexpected(Protocol("keepalive: " + ttl.error()));
  return *ttl;
}

Result<void> EtcdClient::RevokeLease(std::int64_t lease) {
  auto body = Call("/v3/lease/revoke", "{\"ID\":\"" + std::to_string(lease) + "\"}");
  if (!body) return std::unexpected(body.error());
  return {};
}

Result<std::int64_t> EtcdClient::Put(std::string_view key, std::string_view value,
                                     std::int64_t lease) {
  auto body = Call("/v3/kv/put", PutBody(key, value, lease));
  if (!body) return std::unexpected(body.error());
  auto rev = ParseHeaderRevision(*body);
  if (!rev) return std::unexpected(Protocol("put: " + rev.error()));
  return *rev;
}

Result<std::int64_t> EtcdClient::Delete(std::string_view key, bool prefix) {
  auto body = Call("/v3/kv/deleterange", DeleteBody(key, prefix));
  if (!body) return std::unexpected(body.error());
  auto rev = ParseHeaderRevision(*body);
  if (!rev) return std::unexpected(Protocol("delete: " + rev.error()));
  return *rev;
}

Result<RangeResult> EtcdClient::RangePrefix(std::string_view prefix) {
  auto body = Call("/v3/kv/range", RangePrefixBody(prefix));
  if (!body) return std::unexpected(body.error());
  auto r = ParseRange(*body);
  if (!r) return std::unexpected(Protocol("range: " + r.error()));
  return std::move(*r);
}

Result<void> EtcdClient::Compact(std::int64_t revision) {
  auto body = Call("/v3/kv/compaction", "{\"revision\":\"" + std::to_string(revision) + "\"}");
  if (!body) return std::unexpected(body.error());
  return {};
}

Result<std::unique_ptr<Watch>> EtcdClient::WatchPrefix(std::string_view prefix,
                                                       std::int64_t start_revision) {
  const std::size_t n = options_.endpoints.size();
  if (n == 0) return std::unexpected(Error{Error::Kind::kUnavailable, "no etcd endpoint"});
  const std::size_t first = preferred_.load();
  const std::string body = WatchPrefixBody(prefix, start_revision);
  Error last;
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t i = (first + k) % n;
    const client::Url& url = options_.endpoints[i];
    client::ClientRequest req = RequestTo(url, "/v3/watch", body);
    req.timeouts->idle = options_.watch_idle_timeout;
    req.timeouts->total = std::chrono::milliseconds(0);
    auto stream = http_->Stream(std::move(req));
    if (!stream) {
      last = FromClient(stream.error(), url);
      if (IsConnectFailure(stream.error())) continue;
      return std::unexpected(last);
    }
    preferred_.store(i);
    if ((*stream)->status() != 200) {
      std::string text;
      while (auto piece = (*stream)->Next()) {
        if (!*piece || text.size() > 4096) break;
        text += **piece;
      }
      return std::unexpected(FromStatus((*stream)->status(), text));
    }
    return std::make_unique<Watch>(std::move(*stream));
  }
  return std::unexpected(last);
}

}  // namespace kvroute::etcd

#include "client/client_types.h"

#include <charconv>

namespace kvroute::client {

std::string_view ErrorKindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kConnectRefused:
      return "connect_refused";
    case ErrorKind::kConnectTimeout:
      return "connect_timeout";
    case ErrorKind::kFirstByteTimeout:
      return "first_byte_timeout";
    case ErrorKind::kIdleTimeout:
      return "idle_timeout";
    case ErrorKind::kTotalTimeout:
      return "total_timeout";
    case ErrorKind::kClosedEarly:
      return "closed_early";
    case ErrorKind::kProtocol:
      return "protocol";
    case ErrorKind::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

std::string Url::Origin() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

std::expected<Url, std::string> ParseUrl(std::string_view url) {
  constexpr std::string_view kScheme = "http://";
  if (!url.starts_with(kScheme))
    return std::unexpected("only http:// URLs are supported: " + std::string(url));
  std::string_view rest = url.substr(kScheme.size());
  std::size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  Url out;
  out.target = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
  std::string_view port_text;
  if (authority.starts_with('[')) {  // [::1]:8000
    std::size_t close = authority.find(']');
    if (close == std::string_view::npos)
      return std::unexpected("bad IPv6 address in " + std::string(url));
    out.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (after.starts_with(':'))
      port_text = after.substr(1);
    else if (!after.empty())
      return std::unexpected("bad authority in " + std::string(url));
  } else {
    std::size_t colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port_text = authority.substr(colon + 1);
  }
  if (out.host.empty()) return std::unexpected("no host in " + std::string(url));
  if (!port_text.empty()) {
    unsigned port = 0;
    auto [p, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc() || p != port_text.data() + port_text.size() || port == 0 ||
        port > 65535) {
      return std::unexpected("bad port in " + std::string(url));
    }
    out.port = static_cast<std::uint16_t>(port);
  }
  return out;
}

std::expected<ClientRequest, std::string> MakeRequest(std::string method, std::string_view url,
                                                      std::string body, std::string content_type) {
  auto parsed = ParseUrl(url);
  if (!parsed) return std::unexpected(parsed.error());
  ClientRequest r;
  r.method = std::move(method);
  r.host = std::move(parsed->host);
  r.port = parsed->port;
  r.target = std::move(parsed->target);
  r.body = std::move(body);
  r.content_type = std::move(content_type);
  return r;
}

std::string_view ClientResponse::Header(std::string_view lower_name) const {
  for (const auto& [name, value] : headers) {
    if (name == lower_name) return value;
  }
  return {};
}

}  // namespace kvroute::client

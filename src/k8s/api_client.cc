#include "k8s/api_client.h"

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <atomic>
#include <charconv>
#include <fstream>
#include <sstream>

#include "k8s/text_file.h"

namespace kvroute::k8s {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using boost::system::error_code;

// A GET's body (a PodList of a large namespace) is bounded; a watch's is not (it runs for
// timeoutSeconds, and each event is consumed as it arrives).
constexpr std::uint64_t kMaxGetBody = 64ull << 20;


bool IsIpAddress(const std::string& host) {
  error_code ec;
  asio::ip::make_address(host, ec);
  return !ec;
}

}  // namespace

std::expected<ApiEndpoint, std::string> ParseApiUrl(std::string_view url) {
  ApiEndpoint out;
  std::string_view rest;
  if (url.starts_with("https://")) {
    out.tls = true;
    out.port = 443;
    rest = url.substr(8);
  } else if (url.starts_with("http://")) {
    out.port = 80;
    rest = url.substr(7);
  } else {
    return std::unexpected("'" + std::string(url) + "' is not http(s)://host[:port]");
  }
  if (rest.ends_with('/')) rest.remove_suffix(1);
  if (rest.find('/') != std::string_view::npos) {
    return std::unexpected("'" + std::string(url) + "' has a path; give only http(s)://host[:port]");
  }
  std::string_view port_text;
  if (rest.starts_with('[')) {
    const std::size_t close = rest.find(']');
    if (close == std::string_view::npos) return std::unexpected("bad IPv6 address in '" + std::string(url) + "'");
    out.host = std::string(rest.substr(1, close - 1));
    std::string_view after = rest.substr(close + 1);
    if (after.starts_with(':')) {
      port_text = after.substr(1);
    } else if (!after.empty()) {
      return std::unexpected("bad authority in '" + std::string(url) + "'");
    }
  } else {
    const std::size_t colon = rest.rfind(':');
    out.host = std::string(rest.substr(0, colon));
    if (colon != std::string_view::npos) port_text = rest.substr(colon + 1);
  }
  if (out.host.empty()) return std::unexpected("no host in '" + std::string(url) + "'");
  if (!port_text.empty()) {
    unsigned port = 0;
    auto [p, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc() || p != port_text.data() + port_text.size() || port == 0 || port > 65535) {
      return std::unexpected("bad port in '" + std::string(url) + "'");
    }
    out.port = static_cast<std::uint16_t>(port);
  }
  return out;
}

// One connection: a private io_context run by the calling thread until the operation at hand
// completes. Every operation is bounded by the tcp_stream's expiry, so run() always returns.
struct Connection {
  asio::io_context ioc;
  std::optional<beast::tcp_stream> plain;
  std::optional<beast::ssl_stream<beast::tcp_stream>> secure;
  beast::flat_buffer buffer;
  std::optional<http::response_parser<http::string_body>> parser;
  std::atomic<bool> cancelled{false};

  beast::tcp_stream& lowest() { return secure ? beast::get_lowest_layer(*secure) : *plain; }

  template <class Initiate>
  error_code Await(Initiate initiate) {
    error_code result = asio::error::operation_aborted;
    initiate([&result](error_code ec, auto&&...) { result = ec; });
    ioc.restart();
    ioc.run();
    return result;
  }
  template <class Op>
  error_code OnStream(Op op) {
    return Await([&](auto handler) {
      if (secure) {
        op(*secure, std::move(handler));
      } else {
        op(*plain, std::move(handler));
      }
    });
  }

  // Safe from any thread: the close runs on the thread running ioc, or at its next run.
  void Cancel() {
    cancelled = true;
    asio::post(ioc, [this] {
      error_code ignored;
      lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
      lowest().close();
    });
  }
};

struct ApiStream::Impl {
  std::unique_ptr<Connection> conn;
};

struct ApiClient::Impl {
  ApiClientOptions options;
  ApiEndpoint endpoint;
  std::optional<ssl::context> tls;

  std::string Origin() const {
    const std::string host = endpoint.host.find(':') != std::string::npos ? "[" + endpoint.host + "]" : endpoint.host;
    return host + ":" + std::to_string(endpoint.port);
  }

  std::expected<std::unique_ptr<Connection>, std::string> Connect() {
    auto c = std::make_unique<Connection>();
    tcp::resolver resolver(c->ioc);
    error_code ec;
    auto addresses = resolver.resolve(endpoint.host, std::to_string(endpoint.port), ec);
    if (ec) return std::unexpected("resolve " + endpoint.host + ": " + ec.message());
    if (tls) {
      c->secure.emplace(c->ioc, *tls);
    } else {
      c->plain.emplace(c->ioc);
    }
    c->lowest().expires_after(options.connect_timeout);
    ec = c->Await([&](auto handler) { c->lowest().async_connect(addresses, std::move(handler)); });
    if (ec) return std::unexpected("connect " + Origin() + ": " + ec.message());
    if (!tls) return c;
    SSL* native = c->secure->native_handle();
    // SNI only for names (RFC 6066 forbids IP literals); the name check covers both.
    if (!IsIpAddress(endpoint.host)) SSL_set_tlsext_host_name(native, endpoint.host.c_str());
    // When only the name is wrong, OpenSSL's verify result says nothing useful ("unspecified");
    // remember that case to say so.
    bool name_mismatch = false;
    c->secure->set_verify_callback(
        [check = ssl::host_name_verification(endpoint.host), &name_mismatch](
            bool preverified, ssl::verify_context& ctx) mutable {
          const bool ok = check(preverified, ctx);
          if (preverified && !ok) name_mismatch = true;
          return ok;
        },
        ec);
    if (ec) return std::unexpected("tls " + Origin() + ": " + ec.message());
    ec = c->Await([&](auto handler) { c->secure->async_handshake(ssl::stream_base::client, std::move(handler)); });
    if (ec) {
      std::string why = ec.message();
      const long verify = SSL_get_verify_result(native);
      if (name_mismatch) {  // OpenSSL then reports only X509_V_ERR_UNSPECIFIED
        why += ": the certificate does not name " + endpoint.host + " (its subjectAltName must hold it)";
      } else if (verify != X509_V_OK) {
        why += ": " + std::string(X509_verify_cert_error_string(verify)) + " (is ca_file " + options.ca_file +
               " the CA that signed the API server's certificate?)";
      }
      return std::unexpected("tls handshake with " + Origin() + " refused: " + why);
    }
    // The callback refers to a local: nothing verifies after the handshake, but drop it anyway.
    c->secure->set_verify_callback([](bool preverified, ssl::verify_context&) { return preverified; }, ec);
    return c;
  }

  std::expected<std::unique_ptr<Connection>, std::string> SendGet(const std::string& target) {
    auto c = Connect();
    if (!c) return std::unexpected(c.error());
    Connection& conn = **c;
    http::request<http::empty_body> req{http::verb::get, target, 11};
    req.set(http::field::host, endpoint.port == (tls ? 443 : 80) ? endpoint.host : Origin());
    req.set(http::field::accept, "application/json");
    req.set(http::field::user_agent, "kvroute");
    if (!options.token_file.empty()) {
      if (auto token = ReadTextFile(options.token_file)) req.set(http::field::authorization, "Bearer " + TrimTrailingSpace(*token));
    }
    conn.lowest().expires_after(options.response_timeout);
    error_code ec = conn.OnStream([&](auto& s, auto handler) { http::async_write(s, req, std::move(handler)); });
    if (ec) return std::unexpected("write " + Origin() + ": " + ec.message());
    conn.parser.emplace();
    return std::move(*c);
  }
};

ApiStream::ApiStream(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ApiStream::~ApiStream() = default;

int ApiStream::status() const { return static_cast<int>(impl_->conn->parser->get().result_int()); }

std::expected<std::optional<std::string>, std::string> ApiStream::Next(std::chrono::milliseconds idle) {
  Connection& c = *impl_->conn;
  for (;;) {
    if (c.cancelled) return std::unexpected(std::string("cancelled"));
    std::string& body = c.parser->get().body();
    if (!body.empty()) {
      std::string piece = std::move(body);
      body.clear();
      return piece;
    }
    if (c.parser->is_done()) return std::nullopt;
    c.lowest().expires_after(idle);
    error_code ec = c.OnStream([&](auto& s, auto handler) {
      http::async_read_some(s, c.buffer, *c.parser, std::move(handler));
    });
    if (c.cancelled) return std::unexpected(std::string("cancelled"));
    if (ec == beast::error::timeout) return std::unexpected("no data for " + std::to_string(idle.count()) + " ms");
    if (ec && c.parser->get().body().empty()) return std::unexpected(ec.message());
  }
}

void ApiStream::Cancel() { impl_->conn->Cancel(); }

std::expected<std::unique_ptr<ApiClient>, std::string> ApiClient::Create(ApiClientOptions options) {
  auto endpoint = ParseApiUrl(options.api_url);
  if (!endpoint) return std::unexpected(endpoint.error());
  auto impl = std::make_unique<Impl>();
  impl->endpoint = *endpoint;
  if (endpoint->tls) {
    if (options.ca_file.empty()) return std::unexpected(options.api_url + ": https needs a CA file (ca_file)");
    if (!ReadTextFile(options.ca_file)) return std::unexpected("ca_file " + options.ca_file + ": not readable");
    impl->tls.emplace(ssl::context::tls_client);
    error_code ec;
    impl->tls->set_verify_mode(ssl::verify_peer, ec);
    if (!ec) impl->tls->load_verify_file(options.ca_file, ec);
    if (ec) return std::unexpected("ca_file " + options.ca_file + ": not a PEM CA bundle (" + ec.message() + ")");
  }
  impl->options = std::move(options);
  return std::unique_ptr<ApiClient>(new ApiClient(std::move(impl)));
}

ApiClient::ApiClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ApiClient::~ApiClient() = default;
const ApiEndpoint& ApiClient::endpoint() const { return impl_->endpoint; }

std::expected<ApiResponse, std::string> ApiClient::Get(const std::string& target) {
  auto c = impl_->SendGet(target);
  if (!c) return std::unexpected(c.error());
  Connection& conn = **c;
  conn.parser->body_limit(kMaxGetBody);
  error_code ec = conn.OnStream([&](auto& s, auto handler) {
    http::async_read(s, conn.buffer, *conn.parser, std::move(handler));
  });
  if (ec) return std::unexpected("read " + impl_->Origin() + ": " + ec.message());
  return ApiResponse{.status = static_cast<int>(conn.parser->get().result_int()),
                     .body = std::move(conn.parser->get().body())};
}

std::expected<std::unique_ptr<ApiStream>, std::string> ApiClient::Watch(const std::string& target) {
  auto c = impl_->SendGet(target);
  if (!c) return std::unexpected(c.error());
  Connection& conn = **c;
  conn.parser->body_limit(boost::none);
  error_code ec = conn.OnStream([&](auto& s, auto handler) {
    http::async_read_header(s, conn.buffer, *conn.parser, std::move(handler));
  });
  if (ec) return std::unexpected("read " + impl_->Origin() + ": " + ec.message());
  auto impl = std::make_unique<ApiStream::Impl>();
  impl->conn = std::move(*c);
  return std::make_unique<ApiStream>(std::move(impl));
}

}  // namespace kvroute::k8s

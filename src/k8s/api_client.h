// ApiClient: the Kubernetes API over http:// or https://, synchronous, one connection per
// request — what PoolWatcher needs and nothing more: GET an object or a list, and open a watch
// whose body is then read piece by piece.
//
// TLS: an https:// URL verifies the server's chain against `ca_file` (PEM; in a cluster the
// service account's ca.crt) and the certificate's name against the URL's host (a DNS name, or
// an IP address against the certificate's IP SANs, as the API server's certificate carries the
// `kubernetes` Service's cluster IP). There is no fallback to the system store and no switch
// that skips verification: a refused certificate is an error naming the host and OpenSSL's
// reason ("certificate verify failed: unable to get local issuer certificate").
//
// Auth: the bearer token is read from `token_file` before each request (projected
// service-account tokens rotate, hourly by default).
//
// Thread safety: an ApiClient is used by one thread at a time (the watcher's). An ApiStream is
// read by one thread; Cancel() may be called from any thread while it is being read.
#pragma once

#include <chrono>
#include <cstdint>
#include <expected>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace kvroute::k8s {

struct ApiEndpoint {
  bool tls = false;
  std::string host;        // without brackets for IPv6
  std::uint16_t port = 0;  // default 443 for https, 80 for http
};
// "http(s)://host[:port]" with no path (a path is an error: the API's paths are absolute).
std::expected<ApiEndpoint, std::string> ParseApiUrl(std::string_view url);

struct ApiClientOptions {
  std::string api_url;
  std::string ca_file;     // https: required, the PEM bundle the server's chain must end in
  std::string token_file;  // empty: no Authorization header
  // Resolve + TCP connect + TLS handshake of each request.
  std::chrono::milliseconds connect_timeout{5'000};
  // Request written → response header; for Get, the whole body too.
  std::chrono::milliseconds response_timeout{30'000};
};

struct ApiResponse {
  int status = 0;
  std::string body;
};

class ApiStream {
 public:
  struct Impl;
  explicit ApiStream(std::unique_ptr<Impl> impl);
  ~ApiStream();
  ApiStream(const ApiStream&) = delete;
  ApiStream& operator=(const ApiStream&) = delete;

  int status() const;
  // The next piece of the (de-chunked) body; nullopt at its end; an error when the connection
  // drops, nothing arrives for `idle`, or Cancel() was called.
  std::expected<std::optional<std::string>, std::string> Next(std::chrono::milliseconds idle);
  // Ends the stream: a Next() in progress returns an error at once, later ones too.
  void Cancel();

 private:
  std::unique_ptr<Impl> impl_;
};

class ApiClient {
 public:
  // Errors: a bad URL, https without a readable CA bundle, a CA file OpenSSL cannot load.
  static std::expected<std::unique_ptr<ApiClient>, std::string> Create(ApiClientOptions options);
  ~ApiClient();
  ApiClient(const ApiClient&) = delete;
  ApiClient& operator=(const ApiClient&) = delete;

  // GET `target` (a path with its query); any HTTP status is a response, not an error.
  std::expected<ApiResponse, std::string> Get(const std::string& target);
  // GET `target` and return once the response header is in; the body is read by the stream.
  std::expected<std::unique_ptr<ApiStream>, std::string> Watch(const std::string& target);

  const ApiEndpoint& endpoint() const;
  struct Impl;

 private:
  explicit ApiClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvroute::k8s

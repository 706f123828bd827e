// The server's own error answers and the framing checks: see http_server_impl.h for what
// each returns, README.md "Errors" and "Framing" for why.
#include <string>

#include "net/http_server_impl.h"

namespace kvroute::net {
namespace {

constexpr std::string_view kAmbiguousFraming =
    "Bad Request: a request must not carry both Content-Length and Transfer-Encoding (nor "
    "conflicting copies of either)";

}  // namespace

HttpResponse ErrorJson(int status, std::string_view type, std::string_view message) {
  std::string body = R"({"error":{"message":")";
  for (char c : message) {
    if (c == '"' || c == '\\') body += '\\';
    body += c;
  }
  body += R"(","type":")" + std::string(type) + R"(","param":null,"code":)" +
          std::to_string(status) + "}}";
  return JsonResponse(status, std::move(body));
}

// A request whose framing is ambiguous is never served: a proxy in front may have framed it
// differently (RFC 9112 section 6.3), so the connection is not reused either.
std::optional<HttpResponse> ReadErrorAnswer(const beast::error_code& ec,
                                            const RequestParser& parser) {
  if (ec.category() != http::make_error_code(http::error::end_of_stream).category()) {
    return std::nullopt;
  }
  switch (static_cast<http::error>(ec.value())) {
    case http::error::end_of_stream:
    case http::error::partial_message:
    case http::error::short_read:
      return std::nullopt;
    case http::error::body_limit:
      return ErrorJson(413, "BadRequestError", "request body too large");
    case http::error::header_limit:
      return ErrorJson(431, "BadRequestError", "request header too large");
    case http::error::bad_content_length:
    case http::error::bad_transfer_encoding: {
      // Beast stops at the second framing field, so the first one is in the message.
      const auto& fields = parser.get();
      if (fields.count(http::field::content_length) > 0 ||
          fields.count(http::field::transfer_encoding) > 0) {
        return ErrorJson(400, "BadRequestError", kAmbiguousFraming);
      }
      [[fallthrough]];
    }
    default:
      return ErrorJson(400, "BadRequestError", "Bad Request: " + ec.message());
  }
}

// The framing rules Beast's parser lets through (RFC 9112 section 6.1): it reads a request
// with `Transfer-Encoding: gzip` and a Content-Length by the Content-Length, and one with
// `Transfer-Encoding: chunked, chunked` or two Transfer-Encoding fields as it sees fit, where
// a proxy in front may have read the same bytes as two requests. Only a single `chunked` is
// accepted.
std::optional<HttpResponse> FramingAnswer(const RequestParser& parser) {
  const auto& fields = parser.get();
  const std::size_t te = fields.count(http::field::transfer_encoding);
  if (te == 0) return std::nullopt;
  if (fields.count(http::field::content_length) > 0) {
    return ErrorJson(400, "BadRequestError", kAmbiguousFraming);
  }
  std::string_view value = fields[http::field::transfer_encoding];
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  if (te > 1 || !beast::iequals(value, "chunked")) {
    return ErrorJson(400, "BadRequestError",
                     "Bad Request: the only Transfer-Encoding accepted is a single chunked");
  }
  return std::nullopt;
}

}  // namespace kvroute::net

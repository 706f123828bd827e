#include "etcd/wire.h"

#include <boost/json.hpp>

#include <array>
#include <charconv>

namespace kvroute::etcd {
namespace json = boost::json;
namespace {

constexpr std::string_view kAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int Sextet(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// int64 as the gateway writes it: a JSON string of digits; a number is accepted too.
std::expected<std::int64_t, std::string> Int64Field(const json::object& o, std::string_view name) {
  const json::value* v = o.if_contains(name);
  if (v == nullptr || v->is_null()) return 0;  // omitted = default
  if (v->is_int64()) return v->as_int64();
  if (v->is_uint64()) return static_cast<std::int64_t>(v->as_uint64());
  if (v->is_string()) {
    const json::string& s = v->as_string();
    std::int64_t out = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    if (ec == std::errc() && end == s.data() + s.size()) return out;
  }
  return std::unexpected(std::string(name) + " is not an int64");
}

std::expected<std::string, std::string> BytesField(const json::object& o, std::string_view name) {
  const json::value* v = o.if_contains(name);
  if (v == nullptr || v->is_null()) return std::string();
  if (!v->is_string()) return std::unexpected(std::string(name) + " is not a string");
  auto d = Base64Decode(v->as_string());
  if (!d) return std::unexpected(std::string(name) + ": " + d.error());
  return d;
}

std::expected<json::object, std::string> ParseObject(std::string_view body) {
  boost::system::error_code ec;
  json::value v = json::parse(body, ec);
  if (ec) return std::unexpected("not JSON: " + ec.message());
  if (!v.is_object()) return std::unexpected("not a JSON object");
  return std::move(v.as_object());
}

std::expected<KeyValue, std::string> ParseKv(const json::value& v) {
  if (!v.is_object()) return std::unexpected("kv is not an object");
  const json::object& o = v.as_object();
  KeyValue kv;
  auto key = BytesField(o, "key");
  if (!key) return std::unexpected(key.error());
  kv.key = std::move(*key);
  auto value = BytesField(o, "value");
  if (!value) return std::unexpected(value.error());
  kv.value = std::move(*value);
  for (auto [name, out] : {std::pair{"create_revision", &kv.create_revision},
                           std::pair{"mod_revision", &kv.mod_revision},
                           std::pair{"version", &kv.version}, std::pair{"lease", &kv.lease}}) {
    auto n = Int64Field(o, name);
    if (!n) return std::unexpected(n.error());
    *out = *n;
  }
  return kv;
}

std::expected<std::int64_t, std::string> HeaderRevision(const json::object& o) {
  const json::value* h = o.if_contains("header");
  if (h == nullptr || !h->is_object()) return 0;
  return Int64Field(h->as_object(), "revision");
}

std::string Serialize(const json::object& o) { return json::serialize(o); }

}  // namespace

std::string Base64Encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const std::uint32_t n = (std::uint8_t(bytes[i]) << 16) | (std::uint8_t(bytes[i + 1]) << 8) |
                            std::uint8_t(bytes[i + 2]);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += kAlphabet[(n >> 6) & 63];
    out += kAlphabet[n & 63];
  }
  const std::size_t rest = bytes.size() - i;
  if (rest > 0) {
    std::uint32_t n = std::uint8_t(bytes[i]) << 16;
    if (rest == 2) n |= std::uint8_t(bytes[i + 1]) << 8;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += rest == 2 ? kAlphabet[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::expected<std::string, std::string> Base64Decode(std::string_view text) {
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  if (text.size() % 4 == 1) return std::unexpected("base64: truncated");
  std::string out;
  out.reserve(text.size() * 3 / 4);
  std::uint32_t acc = 0;
  int bits = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const int s = Sextet(text[i]);
    if (s < 0) return std::unexpected("base64: bad character at " + std::to_string(i));
    acc = (acc << 6) | static_cast<std::uint32_t>(s);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return out;
}

std::string PrefixEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    auto& c = reinterpret_cast<unsigned char&>(end.back());
    if (c < 0xff) {
      ++c;
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

std::expected<RangeResult, std::string> ParseRange(std::string_view body) {
  auto o = ParseObject(body);
  if (!o) return std::unexpected(o.error());
  RangeResult r;
  auto rev = HeaderRevision(*o);
  if (!rev) return std::unexpected(rev.error());
  r.revision = *rev;
  if (const json::value* kvs = o->if_contains("kvs")) {
    if (!kvs->is_array()) return std::unexpected("kvs is not an array");
    for (const json::value& v : kvs->as_array()) {
      auto kv = ParseKv(v);
      if (!kv) return std::unexpected(kv.error());
      r.kvs.push_back(std::move(*kv));
    }
  }
  return r;
}

std::expected<std::int64_t, std::string> ParseHeaderRevision(std::string_view body) {
  auto o = ParseObject(body);
  if (!o) return std::unexpected(o.error());
  return HeaderRevision(*o);
}

std::expected<LeaseGrant, std::string> ParseLeaseGrant(std::string_view body) {
  auto o = ParseObject(body);
  if (!o) return std::unexpected(o.error());
  auto id = Int64Field(*o, "ID");
  auto ttl = Int64Field(*o, "TTL");
  if (!id) return std::unexpected(id.error());
  if (!ttl) return std::unexpected(ttl.error());
  if (*id == 0 || *ttl <= 0) return std::unexpected("lease grant without ID or TTL");
  return LeaseGrant{*id, *ttl};
}

std::expected<std::int64_t, std::string> ParseKeepAlive(std::string_view body) {
  // One line, {"result": {...}}; the first line only (a client-stream endpoint used one-shot).
  const std::size_t nl = body.find('\n');
  auto o = ParseObject(nl == std::string_view::npos ? body : body.substr(0, nl));
  if (!o) return std::unexpected(o.error());
  const json::value* r = o->if_contains("result");
  if (r == nullptr || !r->is_object()) {
    if (o->contains("error")) return std::unexpected(ErrorText(body));
    return std::unexpected("keepalive answer without result");
  }
  return Int64Field(r->as_object(), "TTL");
}

std::expected<WatchMessage, std::string> ParseWatchMessage(std::string_view line) {
  auto o = ParseObject(line);
  if (!o) return std::unexpected(o.error());
  const json::value* r = o->if_contains("result");
  if (r == nullptr || !r->is_object()) {
    if (o->contains("error")) return std::unexpected(ErrorText(line));
    return std::unexpected("watch message without result");
  }
  const json::object& res = r->as_object();
  WatchMessage m;
  auto rev = HeaderRevision(res);
  if (!rev) return std::unexpected(rev.error());
  m.header_revision = *rev;
  if (const json::value* v = res.if_contains("created")) m.created = v->is_bool() && v->as_bool();
  if (const json::value* v = res.if_contains("canceled")) {
    m.canceled = v->is_bool() && v->as_bool();
  }
  auto compact = Int64Field(res, "compact_revision");
  if (!compact) return std::unexpected(compact.error());
  m.compact_revision = *compact;
  if (const json::value* v = res.if_contains("cancel_reason"); v && v->is_string()) {
    m.cancel_reason = v->as_string();
  }
  if (const json::value* evs = res.if_contains("events")) {
    if (!evs->is_array()) return std::unexpected("events is not an array");
    for (const json::value& ev : evs->as_array()) {
      if (!ev.is_object()) return std::unexpected("event is not an object");
      const json::object& eo = ev.as_object();
      WatchEvent e;
      if (const json::value* t = eo.if_contains("type")) {
        if (t->is_string() && t->as_string() == "DELETE") {
          e.type = WatchEvent::Type::kDelete;
        } else if (!(t->is_string() && t->as_string() == "PUT")) {
          return std::unexpected("unknown event type");
        }
      }
      const json::value* kv = eo.if_contains("kv");
      if (kv == nullptr) return std::unexpected("event without kv");
      auto parsed = ParseKv(*kv);
      if (!parsed) return std::unexpected(parsed.error());
      e.kv = std::move(*parsed);
      m.events.push_back(std::move(e));
    }
  }
  return m;
}

std::string ErrorText(std::string_view body) {
  auto o = ParseObject(body);
  if (!o) return std::string(body.substr(0, 200));
  std::string text;
  if (const json::value* m = o->if_contains("message"); m && m->is_string()) {
    text = m->as_string();
  } else if (const json::value* e = o->if_contains("error"); e && e->is_string()) {
    text = e->as_string();
  } else {
    return std::string(body.substr(0, 200));
  }
  if (const json::value* c = o->if_contains("code"); c && c->is_int64()) {
    text += " (code " + std::to_string(c->as_int64()) + ")";
  }
  return text;
}

std::string PutBody(std::string_view key, std::string_view value, std::int64_t lease) {
  json::object o;
  o["key"] = Base64Encode(key);
  o["value"] = Base64Encode(value);
  if (lease != 0) o["lease"] = std::to_string(lease);
  return Serialize(o);
}

std::string RangePrefixBody(std::string_view prefix) {
  json::object o;
  o["key"] = Base64Encode(prefix);
  o["range_end"] = Base64Encode(PrefixEnd(prefix));
  return Serialize(o);
}

std::string DeleteBody(std::string_view key, bool prefix) {
  json::object o;
  o["key"] = Base64Encode(key);
  if (prefix) o["range_end"] = Base64Encode(PrefixEnd(key));
  return Serialize(o);
}

std::string WatchPrefixBody(std::string_view prefix, std::int64_t start_revision) {
  json::object create;
  create["key"] = Base64Encode(prefix);
  create["range_end"] = Base64Encode(PrefixEnd(prefix));
  if (start_revision > 0) create["start_revision"] = std::to_string(start_revision);
  json::object o;
  o["create_request"] = std::move(create);
  return Serialize(o);
}

}  // namespace kvroute::etcd

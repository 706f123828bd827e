// The etcd v3 JSON gateway's encoding (etcd 3.4's grpc-gateway at /v3/...), without I/O, so
// every rule is unit-tested without a server:
//   - keys, values and range ends are base64 (standard alphabet, padded);
//   - int64 fields arrive as JSON strings ("revision":"7"); numbers are accepted too;
//   - a field at its default value is omitted (a PUT watch event has no "type", a keepalive
//     answer for a lost lease has no "TTL", revision 0 has no "revision");
//   - an error is an HTTP 4xx/5xx with {"error","message","code"} (gRPC status codes).
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <expected>
#include <string>
#include <string_view>
#include <vector>

namespace kvroute::etcd {

std::string Base64Encode(std::string_view bytes);
// Standard alphabet; padding optional; whitespace refused. Error: the offending position.
std::expected<std::string, std::string> Base64Decode(std::string_view text);

// The range end that selects every key starting with `prefix` (etcd's "prefix + 1"): the
// prefix with its last byte below 0xff incremented and what follows dropped; "\0" (every
// key) when the prefix is empty or all 0xff.
std::string PrefixEnd(std::string_view prefix);

struct KeyValue {
  std::string key;
  std::string value;
  std::int64_t create_revision = 0;
  std::int64_t mod_revision = 0;
  std::int64_t version = 0;
  std::int64_t lease = 0;
};

struct RangeResult {
  std::vector<KeyValue> kvs;
  std::int64_t revision = 0;  // the store's revision the range was read at
};

struct WatchEvent {
  enum class Type { kPut, kDelete };
  Type type = Type::kPut;
  KeyValue kv;  // a DELETE carries the key and its mod_revision (the deletion's) only
};

// One line of a watch stream ({"result": {...}}).
struct WatchMessage {
  std::int64_t header_revision = 0;
  bool created = false;
  bool canceled = false;
  std::int64_t compact_revision = 0;  // > 0: start_revision was compacted; relist
  std::string cancel_reason;
  std::vector<WatchEvent> events;
};

// Parsers of the gateway's answers. Errors say what was malformed.
std::expected<RangeResult, std::string> ParseRange(std::string_view body);
std::expected<std::int64_t, std::string> ParseHeaderRevision(std::string_view body);
struct LeaseGrant {
  std::int64_t id = 0;
  std::int64_t ttl_s = 0;
};
std::expected<LeaseGrant, std::string> ParseLeaseGrant(std::string_view body);
// A one-shot keepalive's answer: the lease's remaining TTL, 0 when the lease is gone.
std::expected<std::int64_t, std::string> ParseKeepAlive(std::string_view body);
std::expected<WatchMessage, std::string> ParseWatchMessage(std::string_view line);
// {"error": ..., "message": ..., "code": N} → "message (code N)"; the body itself otherwise.
std::string ErrorText(std::string_view body);

// Request bodies.
std::string PutBody(std::string_view key, std::string_view value, std::int64_t lease);
std::string RangePrefixBody(std::string_view prefix);
std::string DeleteBody(std::string_view key, bool prefix);
std::string WatchPrefixBody(std::string_view prefix, std::int64_t start_revision);

}  // namespace kvroute::etcd

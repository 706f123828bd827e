#include "gateway/replica_delta_codec.h"

#include <cstring>

namespace kvroute::gateway {
namespace {

enum Tag : std::uint8_t {
  kHello = 1,
  kBooked = 2,
  kFirstToken = 3,
  kReleased = 4,
  kPredicted = 5,
};

void PutVarint(std::uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void PutU64(std::uint64_t v, std::string* out) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void PutString(std::string_view s, std::string* out) {
  PutVarint(s.size(), out);
  out->append(s);
}

// Reads from a payload; any failure latches `ok` false and yields zeros.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  bool done() const { return pos_ == bytes_.size(); }
  bool ok() const { return ok_; }

  std::uint8_t U8() {
    if (pos_ >= bytes_.size()) return Fail();
    return static_cast<std::uint8_t>(bytes_[pos_++]);
  }
  std::uint64_t Varint() {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (pos_ >= bytes_.size()) return Fail();
      const auto b = static_cast<std::uint8_t>(bytes_[pos_++]);
      v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return v;
    }
    return Fail();  // over 10 bytes
  }
  std::uint64_t U64() {
    if (bytes_.size() - pos_ < 8) return Fail();
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) {
      v |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(bytes_[pos_ + i])) << (8 * i);
    }
    pos_ += 8;
    return v;
  }
  std::string String() {
    const std::uint64_t n = Varint();
    if (!ok_ || n > kMaxWorkerNameBytes || bytes_.size() - pos_ < n) {
      Fail();
      return {};
    }
    std::string s(bytes_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  std::uint8_t Fail() {
    ok_ = false;
    pos_ = bytes_.size();
    return 0;
  }

 private:
  std::string_view bytes_;
  std::size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace

void AppendDelta(const Delta& delta, std::string* out) {
  struct Visit {
    std::string* out;
    void operator()(const HelloDelta& d) const {
      out->push_back(static_cast<char>(kHello));
      PutU64(d.instance, out);
      PutVarint(d.version, out);
    }
    void operator()(const BookedDelta& d) const {
      out->push_back(static_cast<char>(kBooked));
      PutVarint(d.id, out);
      PutString(d.worker, out);
      PutVarint(d.prompt_tokens, out);
      PutVarint(d.uncached_tokens, out);
      PutVarint(d.kv_blocks, out);
      out->push_back(static_cast<char>(d.first_token_seen ? 1 : 0));
    }
    void operator()(const FirstTokenDelta& d) const {
      out->push_back(static_cast<char>(kFirstToken));
      PutVarint(d.id, out);
    }
    void operator()(const ReleasedDelta& d) const {
      out->push_back(static_cast<char>(kReleased));
      PutVarint(d.id, out);
    }
    void operator()(const PredictedDelta& d) const {
      out->push_back(static_cast<char>(kPredicted));
      PutString(d.worker, out);
      PutVarint(d.keys.size(), out);
      for (kv::BlockKey k : d.keys) PutU64(k, out);
    }
  };
  std::visit(Visit{out}, delta);
}

void AppendFrame(std::string_view payload, std::string* out) {
  PutVarint(payload.size(), out);
  out->append(payload);
}

std::string EncodeFrame(const std::vector<Delta>& deltas) {
  std::string payload;
  for (const Delta& d : deltas) AppendDelta(d, &payload);
  std::string out;
  AppendFrame(payload, &out);
  return out;
}

std::expected<std::vector<Delta>, std::string> DecodePayload(std::string_view payload) {
  std::vector<Delta> out;
  Reader r(payload);
  while (!r.done()) {
    const std::uint8_t tag = r.U8();
    switch (tag) {
      case kHello: {
        HelloDelta d;
        d.instance = r.U64();
        d.version = static_cast<std::uint32_t>(r.Varint());
        out.emplace_back(d);
        break;
      }
      case kBooked: {
        BookedDelta d;
        d.id = r.Varint();
        d.worker = r.String();
        d.prompt_tokens = r.Varint();
        d.uncached_tokens = r.Varint();
        d.kv_blocks = r.Varint();
        d.first_token_seen = (r.U8() & 1) != 0;
        out.emplace_back(std::move(d));
        break;
      }
      case kFirstToken:
        out.emplace_back(FirstTokenDelta{r.Varint()});
        break;
      case kReleased:
        out.emplace_back(ReleasedDelta{r.Varint()});
        break;
      case kPredicted: {
        PredictedDelta d;
        d.worker = r.String();
        const std::uint64_t n = r.Varint();
        if (n > kMaxPredictedKeys) return std::unexpected("predicted: too many keys");
        d.keys.reserve(r.ok() ? n : 0);
        for (std::uint64_t i = 0; i < n && r.ok(); ++i) d.keys.push_back(r.U64());
        out.emplace_back(std::move(d));
        break;
      }
      default:
        return std::unexpected("unknown delta tag " + std::to_string(tag));
    }
    if (!r.ok()) return std::unexpected("truncated or malformed delta (tag " +
                                        std::to_string(tag) + ")");
  }
  return out;
}

std::expected<std::size_t, std::string> FrameDecoder::Feed(std::string_view bytes,
                                                           std::vector<Delta>* out) {
  buffer_.append(bytes);
  std::size_t frames = 0;
  std::size_t pos = 0;
  while (pos < buffer_.size()) {
    // The length prefix: incomplete is fine (more bytes will come), over 10 bytes is not.
    std::uint64_t len = 0;
    std::size_t p = pos;
    bool complete = false;
    for (int shift = 0; shift < 70 && p < buffer_.size(); shift += 7) {
      const auto b = static_cast<std::uint8_t>(buffer_[p++]);
      len |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) {
        complete = true;
        break;
      }
    }
    if (!complete) {
      if (p - pos >= 10) return std::unexpected("frame length over 10 bytes");
      break;
    }
    if (len > kMaxFrameBytes) return std::unexpected("frame over 16 MiB");
    if (buffer_.size() - p < len) break;
    auto deltas = DecodePayload(std::string_view(buffer_).substr(p, len));
    if (!deltas) return std::unexpected(deltas.error());
    for (Delta& d : *deltas) out->push_back(std::move(d));
    ++frames;
    pos = p + len;
  }
  buffer_.erase(0, pos);
  return frames;
}

}  // namespace kvroute::gateway

// kvroute_kv_wire_tool: drives kv/ZmqEventPublisher and kv/ZmqEventSubscriber from the wire
// tests in tests/integration/kv_wire/, where independent decoders (Python msgpack + pyzmq)
// check them against the vLLM protocol. Not part of the kvroute binary.
//
//   publish   --endpoint E [--replay R] [--topic T] [--events array|map]
//             [--batch array|array2|map] [--hashes unsigned|signed|bin] [--fields N]
//             [--drop SEQ]...
//       Binds/connects, prints {"endpoint": ..., "replay": ...}, waits for a line on stdin,
//       publishes the fixed script of ScriptedBatches(), prints {"published": n}, then keeps
//       serving replay until stdin closes.
//   subscribe --endpoint E [--replay R] [--topic T] --count N [--timeout-ms T]
//       Prints {"endpoint": ...}, then one canonical JSON line per callback:
//       {"seq": s, "batch": {...}}, {"restart": true}, {"stale": bool}; exits after N batches
//       (status 0) or at the timeout (status 3), then prints {"stats": {...}}.
#include <chrono>
#include <cinttypes>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kv/wire/zmq_publisher.h"
#include "kv/wire/zmq_subscriber.h"

namespace kvroute::kv {
namespace {

// The script the Python test knows independently (tests/integration/kv_wire/wire_check.py).
std::vector<KvEventBatch> ScriptedBatches() {
  std::vector<KvEventBatch> out;
  BlockStored s0;
  s0.block_hashes = {0x2ceabcfae6d332eaULL, 0xfedcba9876543210ULL};
  for (TokenId t = 1; t <= 32; ++t) s0.token_ids.push_back(t);
  s0.block_size = 16;
  s0.medium = "GPU";
  s0.group_idx = 0;
  s0.kv_cache_spec_kind = "full_attention";
  out.push_back({.ts = 1700000000.5, .events = {s0}, .data_parallel_rank = std::nullopt});

  BlockStored s1;
  s1.block_hashes = {5};
  s1.parent_block_hash = 0xfedcba9876543210ULL;
  for (TokenId t = 100; t < 116; ++t) s1.token_ids.push_back(t);
  s1.block_size = 16;
  s1.lora_id = 3;
  s1.medium = "CPU";
  s1.lora_name = "adapter-a";
  BlockRemoved r1{.block_hashes = {0x2ceabcfae6d332eaULL}, .medium = "GPU", .group_idx = 0};
  out.push_back({.ts = 1700000001.25, .events = {s1, r1}, .data_parallel_rank = std::nullopt});

  BlockRemoved r2{.block_hashes = {7, 8}, .medium = std::nullopt, .group_idx = std::nullopt};
  out.push_back({.ts = 1700000002.0, .events = {AllBlocksCleared{}, r2}, .data_parallel_rank = 0});

  BlockStored s3;
  s3.block_hashes = {(1ULL << 63) + 1};
  s3.parent_block_hash = 5;
  s3.token_ids.assign(16, 0);
  s3.block_size = 16;
  s3.medium = "GPU";
  s3.group_idx = 1;
  s3.kv_cache_spec_kind = "sliding_window";
  s3.kv_cache_spec_sliding_window = 4096;
  out.push_back({.ts = 1700000003.0, .events = {s3}, .data_parallel_rank = std::nullopt});
  return out;
}

// ---- canonical JSON ---------------------------------------------------------------------

void Str(std::string* o, std::string_view s) {
  *o += '"';
  for (char c : s) {
    if (c == '"' || c == '\\') {
      *o += '\\';
      *o += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      *o += buf;
    } else {
      *o += c;
    }
  }
  *o += '"';
}

void U64(std::string* o, std::uint64_t v) { *o += std::to_string(v); }

template <typename T>
void OptInt(std::string* o, const std::optional<T>& v) {
  *o += v ? std::to_string(*v) : "null";
}

void OptStr(std::string* o, const std::optional<std::string>& v) {
  if (v) {
    Str(o, *v);
  } else {
    *o += "null";
  }
}

void Hashes(std::string* o, const std::vector<EngineHash>& hs) {
  *o += '[';
  for (std::size_t i = 0; i < hs.size(); ++i) {
    if (i) *o += ',';
    U64(o, hs[i]);
  }
  *o += ']';
}

std::string BatchJson(const KvEventBatch& b) {
  std::string o = "{\"ts\":";
  char ts[32];
  std::snprintf(ts, sizeof(ts), "%.17g", b.ts);
  o += ts;
  o += ",\"data_parallel_rank\":";
  OptInt(&o, b.data_parallel_rank);
  o += ",\"events\":[";
  for (std::size_t i = 0; i < b.events.size(); ++i) {
    if (i) o += ',';
    if (const auto* s = std::get_if<BlockStored>(&b.events[i])) {
      o += "{\"type\":\"BlockStored\",\"block_hashes\":";
      Hashes(&o, s->block_hashes);
      o += ",\"parent_block_hash\":";
      OptInt(&o, s->parent_block_hash);
      o += ",\"token_ids\":[";
      for (std::size_t k = 0; k < s->token_ids.size(); ++k) {
        if (k) o += ',';
        U64(&o, s->token_ids[k]);
      }
      o += "],\"block_size\":" + std::to_string(s->block_size) + ",\"lora_id\":";
      OptInt(&o, s->lora_id);
      o += ",\"medium\":";
      OptStr(&o, s->medium);
      o += ",\"lora_name\":";
      OptStr(&o, s->lora_name);
      o += ",\"group_idx\":";
      OptInt(&o, s->group_idx);
      o += ",\"kv_cache_spec_kind\":";
      OptStr(&o, s->kv_cache_spec_kind);
      o += ",\"kv_cache_spec_sliding_window\":";
      OptInt(&o, s->kv_cache_spec_sliding_window);
      o += '}';
    } else if (const auto* r = std::get_if<BlockRemoved>(&b.events[i])) {
      o += "{\"type\":\"BlockRemoved\",\"block_hashes\":";
      Hashes(&o, r->block_hashes);
      o += ",\"medium\":";
      OptStr(&o, r->medium);
      o += ",\"group_idx\":";
      OptInt(&o, r->group_idx);
      o += '}';
    } else {
      o += "{\"type\":\"AllBlocksCleared\"}";
    }
  }
  o += "]}";
  return o;
}

// ---- command line -----------------------------------------------------------------------

struct Args {
  std::string mode, endpoint, replay, topic;
  std::string events = "map", batch = "array", hashes = "unsigned";
  int fields = kStoredFieldsAll;
  std::vector<std::uint64_t> drop;
  std::uint64_t count = 0;
  int timeout_ms = 10000;
};

bool Parse(int argc, char** argv, Args* a) {
  if (argc < 2) return false;
  a->mode = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    std::string v = argv[i + 1];
    if (k == "--endpoint")
      a->endpoint = v;
    else if (k == "--replay")
      a->replay = v;
    else if (k == "--topic")
      a->topic = v;
    else if (k == "--events")
      a->events = v;
    else if (k == "--batch")
      a->batch = v;
    else if (k == "--hashes")
      a->hashes = v;
    else if (k == "--fields")
      a->fields = std::stoi(v);
    else if (k == "--drop")
      a->drop.push_back(std::stoull(v));
    else if (k == "--count")
      a->count = std::stoull(v);
    else if (k == "--timeout-ms")
      a->timeout_ms = std::stoi(v);
    else
      return false;
  }
  return !a->endpoint.empty();
}

std::mutex out_mu;
void Emit(const std::string& line) {
  std::lock_guard lock(out_mu);
  std::fputs(line.c_str(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

int Publish(const Args& a) {
  ZmqPublisherOptions o{.endpoint = a.endpoint, .replay_endpoint = a.replay, .topic = a.topic};
  o.encode.events = a.events == "array" ? EventLayout::kArray : EventLayout::kMap;
  o.encode.batch = a.batch == "array2" ? BatchLayout::kArrayNoRank
                   : a.batch == "map"  ? BatchLayout::kMap
                                       : BatchLayout::kArray;
  o.encode.hashes = a.hashes == "signed" ? HashForm::kSigned
                    : a.hashes == "bin"  ? HashForm::kBin8
                                         : HashForm::kUnsigned;
  o.encode.array_stored_fields = a.fields;
  o.drop_on_wire_for_test = [drop = a.drop](std::uint64_t seq) {
    for (std::uint64_t d : drop) {
      if (d == seq) return true;
    }
    return false;
  };
  auto pub = ZmqEventPublisher::Create(std::move(o));
  if (!pub) {
    std::fprintf(stderr, "%s\n", pub.error().c_str());
    return 2;
  }
  std::string hello = "{\"endpoint\":";
  Str(&hello, (*pub)->endpoint());
  hello += ",\"replay\":";
  Str(&hello, (*pub)->replay_endpoint());
  Emit(hello + "}");
  std::string line;
  if (!std::getline(std::cin, line)) return 0;
  auto script = ScriptedBatches();
  for (auto& b : script) (*pub)->Publish(b);
  // Wait (bounded) until the thread has numbered the whole script.
  for (int i = 0; i < 500 && (*pub)->stats().published < script.size(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Emit("{\"published\":" + std::to_string((*pub)->stats().published) + "}");
  while (std::getline(std::cin, line)) {
  }
  (*pub)->Shutdown();
  return 0;
}

int Subscribe(const Args& a) {
  std::mutex mu;
  std::condition_variable cv;
  std::uint64_t batches = 0;
  SubscriberCallbacks cb{
      .on_batch =
          [&](WorkerId, std::uint64_t seq, const KvEventBatch& b) {
            Emit("{\"seq\":" + std::to_string(seq) + ",\"batch\":" + BatchJson(b) + "}");
            std::lock_guard lock(mu);
            ++batches;
            cv.notify_all();
          },
      .on_restart = [](WorkerId) { Emit("{\"restart\":true}"); },
      .on_stale =
          [](WorkerId, bool stale) {
            Emit(std::string("{\"stale\":") + (stale ? "true" : "false") + "}");
          },
  };
  ZmqSubscriberOptions o{.worker = 0,
                         .endpoint = a.endpoint,
                         .replay_endpoint = a.replay,
                         .topic = a.topic,
                         .replay_timeout = std::chrono::milliseconds(2000),
                         .poll_interval = std::chrono::milliseconds(20)};
  auto sub = ZmqEventSubscriber::Create(std::move(o), std::move(cb));
  if (!sub) {
    std::fprintf(stderr, "%s\n", sub.error().c_str());
    return 2;
  }
  std::string hello = "{\"endpoint\":";
  Str(&hello, (*sub)->endpoint());
  Emit(hello + "}");
  bool done;
  {
    std::unique_lock lock(mu);
    done = cv.wait_for(lock, std::chrono::milliseconds(a.timeout_ms),
                       [&] { return batches >= a.count; });
  }
  (*sub)->Stop();
  const auto s = (*sub)->stats();
  Emit("{\"stats\":{\"messages\":" + std::to_string(s.messages) + ",\"batches\":" +
       std::to_string(s.batches) + ",\"malformed\":" + std::to_string(s.malformed) +
       ",\"gaps\":" + std::to_string(s.gaps) + ",\"replayed\":" + std::to_string(s.replayed) +
       ",\"unknown_events\":" + std::to_string(s.unknown_events) + "}}");
  return done ? 0 : 3;
}

}  // namespace
}  // namespace kvroute::kv

int main(int argc, char** argv) {
  kvroute::kv::Args args;
  if (!kvroute::kv::Parse(argc, argv, &args)) {
    std::fprintf(stderr, "usage: see the comment at the top of src/kv/wire/kv_wire_tool.cc\n");
    return 1;
  }
  if (args.mode == "publish") return kvroute::kv::Publish(args);
  if (args.mode == "subscribe") return kvroute::kv::Subscribe(args);
  std::fprintf(stderr, "unknown mode %s\n", args.mode.c_str());
  return 1;
}

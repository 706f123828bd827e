// KV index end-to-end check (issue 4): a live `kvroute sim` publishes KV events,
// kv::ZmqEventSubscriber feeds them to a kv::KvIndex, and after a seeded workload every
// prompt's index lookup must equal the engine's real cache contents (GET /debug/kv_cache),
// per tier. Run by run_kv_e2e.py, which starts the sim and passes its endpoints.
//
//   kv_e2e_check --url http://127.0.0.1:PORT --events tcp://127.0.0.1:P
//                [--replay tcp://127.0.0.1:Q] [--expect-gaps] [--seed N] [--expect-cpu]
//
// Truth: for each prompt, the engine's block hashes (kv::VllmBlockHashes with the sim's
// python_hash_seed; the low 64 bits are what its events carry) are looked up in the cached
// set of each tier; the consecutive run from block 0 held in that tier or a faster one is the
// tier's true depth. The index answers with kv::BlockKeyer keys (kvroute's own hash), so
// equality also proves the dual-key mapping. Exit 0: all equal and the workload really evicted; 1: a mismatch or a failed
// expectation (printed); 2: usage or setup error.
#include <algorithm>
#include <array>
#include <atomic>
#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <expected>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "client/blocking_http_client.h"
#include "kv/index/index.h"
#include "kv/keys/block_key.h"
#include "kv/keys/vllm_hash.h"
#include "kv/wire/zmq_subscriber.h"
#include "workload.h"

namespace kvroute::kv_e2e {
namespace {

using namespace std::chrono_literals;

struct Args {
  std::string url, events, replay;
  bool expect_gaps = false;
  bool expect_cpu = false;
  std::uint64_t seed = 20261129;
};

struct Snapshot {
  std::uint32_t block_size = 0;
  std::string python_hash_seed;
  std::uint32_t running = 0, waiting = 0;
  std::uint64_t published = 0;
  std::array<std::unordered_set<kv::EngineHash>, kv::kNumTiers> tiers;
};

std::expected<Snapshot, std::string> FetchCache(client::BlockingHttpClient& http,
                                                const std::string& url) {
  auto request = client::MakeRequest("GET", url + "/debug/kv_cache");
  if (!request) return std::unexpected(request.error());
  auto response = http.Send(std::move(*request));
  if (!response) return std::unexpected("GET /debug/kv_cache: " + response.error().text);
  if (response->status != 200) return std::unexpected("GET /debug/kv_cache: " + response->body);
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(response->body, ec);
  if (ec || !v.is_object()) return std::unexpected("GET /debug/kv_cache: not a JSON object");
  const auto& o = v.get_object();
  Snapshot s;
  try {
    s.block_size = o.at("block_size").to_number<std::uint32_t>();
    s.python_hash_seed = std::string(o.at("python_hash_seed").as_string());
    if (o.at("hash_algo").as_string() != "sha256_cbor") return std::unexpected("hash_algo");
    s.running = o.at("num_running").to_number<std::uint32_t>();
    s.waiting = o.at("num_waiting").to_number<std::uint32_t>();
    s.published = o.at("kv_events").at("published").to_number<std::uint64_t>();
    for (int t = 0; t < kv::kNumTiers; ++t) {
      for (const auto& h : o.at("tiers").at(kv::TierName(static_cast<kv::Tier>(t))).as_array()) {
        s.tiers[t].insert(h.to_number<std::uint64_t>());
      }
    }
  } catch (const std::exception& e) {
    return std::unexpected(std::string("GET /debug/kv_cache: ") + e.what());
  }
  return s;
}

bool SendCompletion(client::BlockingHttpClient& http, const std::string& url,
                    const std::vector<TokenId>& prompt) {
  boost::json::array ids(prompt.begin(), prompt.end());
  boost::json::object body{{"model", "m"},
                           {"prompt", std::move(ids)},
                           {"max_tokens", 4},
                           {"ignore_eos", true},
                           {"temperature", 0.0}};
  auto request = client::MakeRequest("POST", url + "/v1/completions", boost::json::serialize(body),
                                     "application/json");
  if (!request) return false;
  auto response = http.Send(std::move(*request));
  if (!response || response->status != 200) {
    std::fprintf(stderr, "completion failed: %s\n",
                 response ? response->body.c_str() : response.error().text.c_str());
    return false;
  }
  return true;
}

// Consecutive blocks from block 0 present in tier `tier` or a faster one (a tier's depth
// counts the faster tiers' blocks, kv::WorkerMatch).
std::uint32_t TrueDepth(const std::vector<kv::Sha256Digest>& hashes,
                        const std::array<std::unordered_set<kv::EngineHash>, kv::kNumTiers>& tiers,
                        int tier) {
  auto held = [&](std::uint64_t h) {
    for (int t = 0; t <= tier; ++t) {
      if (tiers[t].contains(h)) return true;
    }
    return false;
  };
  std::uint32_t depth = 0;
  while (depth < hashes.size() && held(hashes[depth].Low64())) ++depth;
  return depth;
}

int Run(const Args& args) {
  client::BlockingHttpClient http;
  auto first = FetchCache(http, args.url);
  if (!first) {
    std::fprintf(stderr, "setup: %s\n", first.error().c_str());
    return 2;
  }
  const kv::BlockKeyer keyer(first->block_size);
  kv::KvIndex index(keyer);
  constexpr WorkerId kWorker = 1;
  std::atomic<std::int64_t> last_seq{-1};
  std::atomic<int> stale_now{0};

  kv::ZmqSubscriberOptions options;
  options.worker = kWorker;
  options.endpoint = args.events;
  options.mode = kv::SocketMode::kConnect;
  options.replay_endpoint = args.replay;
  options.poll_interval = 20ms;
  kv::SubscriberCallbacks callbacks;
  callbacks.on_batch = [&](WorkerId w, std::uint64_t seq, const kv::KvEventBatch& batch) {
    index.ApplyBatch(w, batch);
    last_seq.store(static_cast<std::int64_t>(seq));
  };
  callbacks.on_restart = [&](WorkerId w) { index.RemoveWorker(w); };
  callbacks.on_stale = [&](WorkerId w, bool stale) {
    stale ? index.MarkStale(w) : index.ClearStale(w);
    stale_now.store(stale ? 1 : 0);
  };
  auto subscriber = kv::ZmqEventSubscriber::Create(options, callbacks);
  if (!subscriber) {
    std::fprintf(stderr, "setup: %s\n", subscriber.error().c_str());
    return 2;
  }
  std::this_thread::sleep_for(300ms);  // let SUB connect before the first batch (slow joiner)

  std::vector<std::vector<TokenId>> prompts =
      MakeWorkload(args.seed, /*sessions=*/6, /*turns=*/6, /*siblings=*/12, /*unrelated=*/30);
  std::atomic<std::size_t> next{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&] {
      for (std::size_t i = next++; i < prompts.size(); i = next++) {
        if (!SendCompletion(http, args.url, prompts[i])) ++failures;
      }
    });
  }
  for (auto& t : clients) t.join();
  if (failures > 0) {
    std::fprintf(stderr, "%d completion(s) failed\n", failures.load());
    return 1;
  }

  // Quiescence: the engine is idle and the subscriber has delivered every numbered batch.
  // A batch the sim dropped on the wire as the LAST one is invisible until a later batch
  // arrives, so after two stable polls a small fresh prompt is sent to produce one.
  std::mt19937_64 rng(args.seed ^ 0x9E3779B97F4A7C15ull);
  std::optional<Snapshot> truth;
  std::uint64_t previous_published = ~0ull;
  int stable = 0, nudges = 0;
  for (int poll = 0; poll < 400 && !truth; ++poll) {
    auto s = FetchCache(http, args.url);
    if (!s) {
      std::fprintf(stderr, "%s\n", s.error().c_str());
      return 1;
    }
    bool idle = s->running == 0 && s->waiting == 0;
    bool caught_up = last_seq.load() + 1 == static_cast<std::int64_t>(s->published);
    stable = (idle && s->published == previous_published) ? stable + 1 : 0;
    previous_published = s->published;
    if (idle && caught_up && stable >= 2) {
      truth = std::move(*s);
      break;
    }
    if (idle && !caught_up && stable >= 5 && nudges < 10) {
      std::vector<TokenId> nudge(2 * first->block_size);
      for (auto& t : nudge) t = static_cast<TokenId>(30000 + rng() % 1000);
      if (!SendCompletion(http, args.url, nudge)) return 1;
      prompts.push_back(std::move(nudge));
      ++nudges;
      stable = 0;
    }
    std::this_thread::sleep_for(50ms);
  }
  (*subscriber)->Stop();
  kv::ZmqSubscriberStats stats = (*subscriber)->stats();
  kv::IndexCounters counters = index.counters();
  std::printf(
      "prompts=%zu batches=%llu replayed=%llu gaps=%llu stale_episodes=%llu malformed=%llu "
      "blocks_stored=%llu blocks_removed=%llu gpu_blocks=%zu cpu_blocks=%zu nudges=%d\n",
      prompts.size(), (unsigned long long)stats.batches, (unsigned long long)stats.replayed,
      (unsigned long long)stats.gaps, (unsigned long long)stats.stale_episodes,
      (unsigned long long)stats.malformed, (unsigned long long)counters.blocks_stored,
      (unsigned long long)counters.blocks_removed, truth ? truth->tiers[0].size() : 0,
      truth ? truth->tiers[1].size() : 0, nudges);
  if (!truth) {
    std::printf("FAIL no quiescence: last delivered seq %lld\n", (long long)last_seq.load());
    return 1;
  }

  int failed = 0;
  auto expect = [&failed](bool ok, const std::string& what) {
    if (!ok && ++failed <= 20) std::printf("FAIL %s\n", what.c_str());
  };
  const kv::Sha256Digest none = kv::VllmNoneHash(truth->python_hash_seed);
  std::uint64_t gpu_depth_sum = 0;
  std::size_t partial = 0;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    auto hashes = kv::VllmBlockHashes(prompts[i], truth->block_size, none);
    auto matches = index.Lookup(keyer.Keys(prompts[i]));
    kv::WorkerMatch ours{.worker = kWorker};
    for (const auto& m : matches) {
      if (m.worker == kWorker) ours = m;
    }
    for (int t = 0; t < kv::kNumTiers; ++t) {
      std::uint32_t expected = TrueDepth(hashes, truth->tiers, t);
      expect(ours.depth[t] == expected,
             "prompt " + std::to_string(i) + " tier " + kv::TierName(static_cast<kv::Tier>(t)) +
                 ": index depth " + std::to_string(ours.depth[t]) + ", engine " +
                 std::to_string(expected) + " (of " + std::to_string(hashes.size()) + ")");
      if (t == 0) {
        gpu_depth_sum += expected;
        partial += expected < hashes.size();
      }
    }
    expect(!ours.stale, "prompt " + std::to_string(i) + ": worker flagged stale");
  }
  // The comparison must not be vacuous: something is cached, something was evicted.
  expect(gpu_depth_sum > 0, "no prompt has any GPU-cached block");
  expect(partial > 0, "every prompt is fully cached: the workload never evicted");
  expect(counters.blocks_removed > 0, "no BlockRemoved event: no eviction happened");
  if (args.expect_cpu) expect(!truth->tiers[1].empty(), "the CPU tier holds nothing");
  expect(stats.stale_episodes == 0 && stale_now.load() == 0, "the subscriber went stale");
  expect(stats.malformed == 0, "malformed messages");
  if (args.expect_gaps) {
    expect(stats.gaps > 0, "no gap seen although the sim drops batches on the wire");
    expect(stats.replayed > 0, "nothing was replayed");
  }
  if (failed > 0) {
    std::printf("%d failure(s)\n", failed);
    return 1;
  }
  std::printf("ok: index lookups equal the engine's cache for %zu prompts x %d tiers\n",
              prompts.size(), kv::kNumTiers);
  return 0;
}

}  // namespace
}  // namespace kvroute::kv_e2e

int main(int argc, char** argv) {
  kvroute::kv_e2e::Args args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--url") {
      args.url = value();
    } else if (a == "--events") {
      args.events = value();
    } else if (a == "--replay") {
      args.replay = value();
    } else if (a == "--seed") {
      args.seed = std::stoull(value());
    } else if (a == "--expect-gaps") {
      args.expect_gaps = true;
    } else if (a == "--expect-cpu") {
      args.expect_cpu = true;
    } else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (args.url.empty() || args.events.empty()) {
    std::fprintf(stderr, "usage: kv_e2e_check --url URL --events EP [--replay EP] ...\n");
    return 2;
  }
  return kvroute::kv_e2e::Run(args);
}

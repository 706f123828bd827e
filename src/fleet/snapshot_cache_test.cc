// RouterState::Refresh (kvroute simulate's incremental snapshots) against Snapshot (kvroute
// serve's fresh ones): the same values after any sequence of events, and what the
// simulator relies on (a dead worker's load goes, its learned rates stay).
#include <gtest/gtest.h>

#include <random>

#include "fleet/router_state.h"

namespace kvroute::fleet {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

WorkerSpec Spec(int i, std::string profile = "") {
  WorkerSpec s;
  s.name = "w" + std::to_string(i);
  s.models = {"m"};
  s.profile = std::move(profile);
  return s;
}

// Every field Decide reads, compared exactly: both paths run the same code on the same state.
void ExpectSame(const sched::WorkerSnapshot& a, const sched::WorkerSnapshot& b) {
  SCOPED_TRACE("worker " + std::to_string(a.id));
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.models, b.models);
  EXPECT_EQ(a.healthy, b.healthy);
  EXPECT_EQ(a.draining, b.draining);
  EXPECT_EQ(a.role, b.role);
  EXPECT_EQ(a.inflight_requests, b.inflight_requests);
  EXPECT_EQ(a.pending_prefill_tokens, b.pending_prefill_tokens);
  EXPECT_EQ(a.pending_prefill_requests, b.pending_prefill_requests);
  EXPECT_EQ(a.active_kv_blocks, b.active_kv_blocks);
  EXPECT_EQ(a.kv_capacity_blocks, b.kv_capacity_blocks);
  ASSERT_EQ(a.scraped.has_value(), b.scraped.has_value());
  if (a.scraped) {
    EXPECT_EQ(a.scraped->age_s, b.scraped->age_s);
    EXPECT_EQ(a.scraped->num_waiting, b.scraped->num_waiting);
    EXPECT_EQ(a.scraped->kv_usage, b.scraped->kv_usage);
  }
  EXPECT_EQ(a.prefill_tokens_per_s, b.prefill_tokens_per_s);
  EXPECT_EQ(a.prefill_attention_per_token, b.prefill_attention_per_token);
  ASSERT_EQ(a.decode_step.has_value(), b.decode_step.has_value());
  if (a.decode_step) {
    EXPECT_EQ(a.decode_step->base_s, b.decode_step->base_s);
    EXPECT_EQ(a.decode_step->per_sequence_s, b.decode_step->per_sequence_s);
    EXPECT_EQ(a.decode_step->per_kv_token_s, b.decode_step->per_kv_token_s);
  }
  EXPECT_EQ(a.tier_load_bytes_per_s, b.tier_load_bytes_per_s);
  EXPECT_EQ(a.kv_bytes_per_block, b.kv_bytes_per_block);
  EXPECT_EQ(a.wait_correction, b.wait_correction);
  EXPECT_EQ(a.tp, b.tp);
  EXPECT_EQ(a.gpus, b.gpus);
  EXPECT_EQ(a.kv_link_bytes_per_s, b.kv_link_bytes_per_s);
  EXPECT_EQ(a.kv_link_latency_s, b.kv_link_latency_s);
  EXPECT_EQ(a.kv_transfer_bytes_per_block, b.kv_transfer_bytes_per_block);
}

void ExpectRefreshEqualsSnapshot(const RouterState& state, SnapshotCache& cache, Nanos now) {
  state.Refresh(now, &cache);
  const std::vector<sched::WorkerSnapshot> fresh = state.Snapshot(now, "");
  ASSERT_EQ(cache.workers().size(), fresh.size());
  for (std::size_t i = 0; i < fresh.size(); ++i) ExpectSame(cache.workers()[i], fresh[i]);
}

// Random requests on 6 workers of two profiles (first tokens, tokens in windows, completions
// and failures, predictions that calibrate), deaths and restarts, scrapes, a worker added
// mid-run, ejections that run out into probing; after every event the incremental snapshot
// equals a fresh one.
TEST(SnapshotCacheTest, RefreshEqualsAFreshSnapshotAfterAnySequenceOfEvents) {
  RouterState state({.health = {.failures_to_eject = 1, .base_backoff = milliseconds(200)}});
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(state.Add(Spec(i, i < 4 ? "" : "llama-3.1-8b-h100"), Nanos(0)).has_value());
  }
  SnapshotCache cache;
  std::mt19937_64 rng(7);
  struct Live {
    RequestId id;
    bool first = false;
  };
  std::vector<Live> live;
  RequestId next = 1;
  Nanos now(0);
  for (int step = 0; step < 4000; ++step) {
    now += milliseconds(1 + rng() % 40);
    const int what = static_cast<int>(rng() % 100);
    const auto workers = static_cast<WorkerId>(state.List().size());
    if (what < 30 || live.empty()) {
      const auto w = static_cast<WorkerId>(rng() % workers);
      RoutedRequest r{.worker = w,
                      .prompt_tokens = 500 + rng() % 8000,
                      .uncached_tokens = rng() % 4000,
                      .kv_blocks = 40 + rng() % 500};
      if (rng() % 2 == 0) {
        r.predicted_ttft_s = 0.05 + 0.001 * static_cast<double>(rng() % 2000);
        r.predicted_wait_s = *r.predicted_ttft_s / 2;
        r.wait_correction = 1;
      }
      if (state.Book(next, r, now)) live.push_back({next});
      ++next;
    } else if (what < 80) {
      Live& l = live[rng() % live.size()];
      if (!l.first) {
        state.OnFirstToken(l.id, now);
        l.first = true;
      } else {
        state.OnToken(l.id, now, 1 + static_cast<std::uint32_t>(rng() % 4));
      }
    } else if (what < 95) {
      const std::size_t k = rng() % live.size();
      state.OnDone(live[k].id, now, rng() % 8 != 0);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
    } else if (what < 96) {
      const auto w = static_cast<WorkerId>(rng() % workers);
      state.ForgetBookings(w);
      state.health().SetDown(w, rng() % 2 == 0);
    } else if (what < 97) {
      const auto w = static_cast<WorkerId>(rng() % workers);
      if (rng() % 2 == 0) {
        state.health().OnFailure(w, now);  // ejected for 200 ms, then probing
      } else {
        state.health().OnSuccess(w, now);
      }
    } else if (what < 98 && rng() % 3 == 0) {
      // A finished KV pull: the link's learned bandwidth moves without a load version.
      const auto w = static_cast<WorkerId>(rng() % workers);
      state.OnKvTransfer(w, 1e6 * static_cast<double>(1 + rng() % 500), 2,
                         0.002 + 0.001 * static_cast<double>(rng() % 50));
    } else if (what < 99) {
      const auto w = static_cast<WorkerId>(rng() % workers);
      EngineMetrics m;
      m.scraped_at = now;
      m.num_waiting = static_cast<std::uint32_t>(rng() % 10);
      m.kv_usage = 0.01 * static_cast<double>(rng() % 100);
      state.SetMetrics(w, m);
    } else if (workers < 8) {
      ASSERT_TRUE(state.Add(Spec(static_cast<int>(workers)), now).has_value());
    }
    ExpectRefreshEqualsSnapshot(state, cache, now);
    if (testing::Test::HasFailure()) FAIL() << "at step " << step;
  }
}

TEST(SnapshotCacheTest, AWorkersLoadIsSeenAtTheNextRefreshAfterEveryChange) {
  RouterState state;
  ASSERT_TRUE(state.Add(Spec(0), Nanos(0)).has_value());
  ASSERT_TRUE(state.Add(Spec(1), Nanos(0)).has_value());
  SnapshotCache cache;
  state.Refresh(Nanos(0), &cache);
  state.Book(1, {.worker = 0, .prompt_tokens = 2048, .uncached_tokens = 2048, .kv_blocks = 130},
             Nanos(0));
  state.Refresh(Nanos(0), &cache);
  EXPECT_EQ(cache.workers()[0].inflight_requests, 1u);
  EXPECT_EQ(cache.workers()[0].pending_prefill_tokens, 2048u);
  EXPECT_EQ(cache.workers()[0].pending_prefill_requests, 1u);
  EXPECT_EQ(cache.workers()[1].inflight_requests, 0u);
  const double seeded = *cache.workers()[0].prefill_tokens_per_s;
  state.OnFirstToken(1, milliseconds(2000));  // slower than the seed: the rate drops
  state.Refresh(milliseconds(2000), &cache);
  EXPECT_EQ(cache.workers()[0].pending_prefill_tokens, 0u);
  EXPECT_EQ(cache.workers()[0].pending_prefill_requests, 0u);  // decoding now, still in flight
  EXPECT_EQ(cache.workers()[0].inflight_requests, 1u);
  EXPECT_LT(*cache.workers()[0].prefill_tokens_per_s, seeded);
  state.OnDone(1, milliseconds(2030), true);
  state.Refresh(milliseconds(2030), &cache);
  EXPECT_EQ(cache.workers()[0].inflight_requests, 0u);
  EXPECT_EQ(cache.workers()[0].active_kv_blocks, 0u);
}

// kvroute simulate's failures: in-flight bookings go with the worker, learned rates stay (as
// the live registry keeps them while health checks eject a worker), and it reads as down.
TEST(SnapshotCacheTest, ADeadWorkerLosesItsBookingsAndKeepsItsLearnedRates) {
  RouterState state;
  ASSERT_TRUE(state.Add(Spec(0), Nanos(0)).has_value());
  state.Book(1, {.worker = 0, .prompt_tokens = 4096, .uncached_tokens = 4096, .kv_blocks = 260},
             Nanos(0));
  state.OnFirstToken(1, milliseconds(3000));
  state.Book(2, {.worker = 0, .prompt_tokens = 512, .uncached_tokens = 512, .kv_blocks = 40},
             milliseconds(3000));
  SnapshotCache cache;
  state.Refresh(milliseconds(3000), &cache);
  const double learned = *cache.workers()[0].prefill_tokens_per_s;
  state.ForgetBookings(0);
  state.health().SetDown(0, true);
  state.OnDone(2, milliseconds(3100), false);  // a late call for a forgotten request
  state.Refresh(milliseconds(3100), &cache);
  const sched::WorkerSnapshot& s = cache.workers()[0];
  EXPECT_FALSE(s.healthy);
  EXPECT_EQ(s.inflight_requests, 0u);
  EXPECT_EQ(s.pending_prefill_tokens, 0u);
  EXPECT_EQ(s.active_kv_blocks, 0u);
  EXPECT_DOUBLE_EQ(*s.prefill_tokens_per_s, learned);
  EXPECT_EQ(state.load().inflight(), 0u);
  state.health().SetDown(0, false);
  state.Refresh(milliseconds(3200), &cache);
  EXPECT_TRUE(cache.workers()[0].healthy);
}

// A worker with fewer than 10 decode samples of its own is lent its same-profile peers'
// learned decode model; before any peer has that many, every worker keeps its own (seeded).
TEST(SnapshotCacheTest, AWorkerWithFewDecodeSamplesIsLentItsPeersDecodeModel) {
  RouterState state;
  ASSERT_TRUE(state.Add(Spec(0), Nanos(0)).has_value());
  ASSERT_TRUE(state.Add(Spec(1), Nanos(0)).has_value());
  SnapshotCache cache;
  state.Refresh(Nanos(0), &cache);
  const sched::StepTimeModel seed = *cache.workers()[1].decode_step;
  const double itl = 2 * seed.Seconds(1, 4096);  // worker 0 decodes at half the seed's speed
  Nanos now = seconds(1);
  state.Book(1, {.worker = 0, .prompt_tokens = 4096, .uncached_tokens = 4096, .kv_blocks = 260},
             Nanos(0));
  state.OnFirstToken(1, now);
  for (int k = 0; k < 40; ++k) {
    now += FromSeconds(itl);
    state.OnToken(1, now);
  }
  state.OnDone(1, now, true);
  const auto learned = state.rates().Estimate(0);
  ASSERT_TRUE(learned.has_value());
  ASSERT_GE(learned->decode_samples, 10u);
  ASSERT_LT(state.rates().Estimate(1)->decode_samples, 10u);
  state.Refresh(now, &cache);
  EXPECT_DOUBLE_EQ(cache.workers()[0].decode_step->Seconds(1, 4096),
                   learned->decode.Seconds(1, 4096));
  EXPECT_NEAR(cache.workers()[1].decode_step->Seconds(1, 4096), learned->decode.Seconds(1, 4096),
              1e-12);
  EXPECT_GT(cache.workers()[1].decode_step->Seconds(1, 4096), 1.2 * seed.Seconds(1, 4096));
}

}  // namespace
}  // namespace kvroute::fleet

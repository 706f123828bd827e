#include "sim/engine_loop.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include "engine/profile.h"
#include "kv/keys/vllm_hash.h"

namespace kvroute::sim {
namespace {

using namespace std::chrono_literals;

class Recorder final : public RequestObserver {
 public:
  void OnToken(const engine::TokenEvent& event, Nanos at) override {
    std::lock_guard lock(mu_);
    tokens.push_back(event);
    times.push_back(at);
    if (event.finished) ended = true;
    cv_.notify_all();
  }
  void OnEnded(const std::string& e, Nanos) override {
    std::lock_guard lock(mu_);
    error = e;
    ended = true;
    ended_without_token = true;
    cv_.notify_all();
  }
  // Bounded wait; false on timeout.
  bool WaitFor(auto pred, std::chrono::seconds limit = 20s) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, limit, [&] { return pred(*this); });
  }
  std::size_t count() {
    std::lock_guard lock(mu_);
    return tokens.size();
  }

  std::vector<engine::TokenEvent> tokens;
  std::vector<Nanos> times;
  bool ended = false;
  bool ended_without_token = false;
  std::string error;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
};

class EngineLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto profile = engine::LoadProfile(engine::kDefaultProfileName);
    ASSERT_TRUE(profile.has_value()) << profile.error();
    engine::EngineConfig config;
    config.max_model_len = 1024;
    config.num_gpu_blocks_override = 512;
    EngineLoopOptions options;
    options.publish = [this](kv::KvEventBatch b) {
      std::lock_guard lock(batches_mu_);
      batches_.push_back(std::move(b));
    };
    loop_ = std::make_unique<EngineLoop>(engine::NewEngine(*profile, config), clock_,
                                         std::move(options));
    loop_->Start();
  }

  static engine::RequestSpec Spec(std::string id, std::size_t prompt_len,
                                  std::uint32_t max_tokens) {
    engine::RequestSpec s;
    s.id = std::move(id);
    for (std::size_t i = 0; i < prompt_len; ++i) s.prompt.push_back(100 + static_cast<TokenId>(i));
    s.max_tokens = max_tokens;
    s.ignore_eos = true;
    return s;
  }

  // Simulated time runs 100x faster: a 30 ms step takes 0.3 ms, and a 900-token request
  // lasts long enough (~0.2 s) for an abort to land mid-way.
  SteadyClock clock_{100.0};
  std::mutex batches_mu_;
  std::vector<kv::KvEventBatch> batches_;
  std::unique_ptr<EngineLoop> loop_;
};

TEST_F(EngineLoopTest, DeliversEveryTokenInOrderThenFinishes) {
  auto rec = std::make_shared<Recorder>();
  loop_->Submit(Spec("a", 40, 8), rec);
  ASSERT_TRUE(rec->WaitFor([](Recorder& r) { return r.ended; }));
  ASSERT_EQ(rec->tokens.size(), 8u);
  EXPECT_TRUE(rec->tokens.front().is_first);
  EXPECT_EQ(rec->tokens.back().finished, engine::FinishReason::kLength);
  for (std::size_t i = 1; i < rec->times.size(); ++i) EXPECT_GT(rec->times[i], rec->times[i - 1]);
  EXPECT_FALSE(rec->ended_without_token);
}

TEST_F(EngineLoopTest, EngineRefusalReachesTheObserverWithItsReason) {
  auto rec = std::make_shared<Recorder>();
  loop_->Submit(Spec("too-long", 2000, 8), rec);
  ASSERT_TRUE(rec->WaitFor([](Recorder& r) { return r.ended; }));
  EXPECT_TRUE(rec->ended_without_token);
  EXPECT_FALSE(rec->error.empty());
}

TEST_F(EngineLoopTest, AbortStopsTheRequestAndItsTokens) {
  auto rec = std::make_shared<Recorder>();
  loop_->Submit(Spec("long", 16, 900), rec);
  ASSERT_TRUE(rec->WaitFor([](Recorder& r) { return !r.tokens.empty(); }));
  loop_->Abort("long");
  for (int i = 0; i < 2000 && loop_->Stats().num_running > 0; ++i) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(loop_->Stats().num_running, 0u);
  std::size_t seen = rec->count();
  EXPECT_LT(seen, 900u);
  EXPECT_FALSE(rec->ended);
}

TEST_F(EngineLoopTest, PublishesStoredBlocksAsBatches) {
  auto rec = std::make_shared<Recorder>();
  loop_->Submit(Spec("blocks", 64, 2), rec);
  ASSERT_TRUE(rec->WaitFor([](Recorder& r) { return r.ended; }));
  std::lock_guard lock(batches_mu_);
  ASSERT_FALSE(batches_.empty());
  bool stored = false;
  for (const auto& b : batches_) {
    EXPECT_FALSE(b.events.empty());
    EXPECT_GT(b.ts, 1.6e9);  // wall-clock seconds, as vLLM's time.time()
    for (const auto& e : b.events) stored |= std::holds_alternative<kv::BlockStored>(e);
  }
  EXPECT_TRUE(stored);
}

TEST_F(EngineLoopTest, InspectCacheHoldsThePromptBlocksUnderTheirVllmHashes) {
  auto rec = std::make_shared<Recorder>();
  engine::RequestSpec spec = Spec("inspect", 64, 2);
  std::vector<TokenId> prompt = spec.prompt;
  loop_->Submit(std::move(spec), rec);
  ASSERT_TRUE(rec->WaitFor([](Recorder& r) { return r.ended; }));

  std::mutex mu;
  std::condition_variable cv;
  std::optional<CacheContents> contents;
  loop_->InspectCache([&](CacheContents c) {
    std::lock_guard lock(mu);
    contents = std::move(c);
    cv.notify_all();
  });
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 20s, [&] { return contents.has_value(); }));
  }
  const auto& gpu = contents->tiers[static_cast<int>(kv::Tier::kGpu)];
  auto hashes = kv::VllmBlockHashes(prompt, 16, kv::VllmNoneHash("0"));
  ASSERT_EQ(hashes.size(), 4u);
  for (const auto& h : hashes) {
    EXPECT_NE(std::find(gpu.begin(), gpu.end(), h.Low64()), gpu.end()) << h.Hex();
  }
  EXPECT_TRUE(contents->tiers[static_cast<int>(kv::Tier::kCpu)].empty());  // no CPU tier
  EXPECT_EQ(contents->stats.num_running, 0u);
}

TEST_F(EngineLoopTest, StopEndsLiveRequestsAsAborted) {
  auto rec = std::make_shared<Recorder>();
  loop_->Submit(Spec("live", 16, 900), rec);
  ASSERT_TRUE(rec->WaitFor([](Recorder& r) { return !r.tokens.empty(); }));
  loop_->Stop();
  EXPECT_TRUE(rec->ended_without_token);
  EXPECT_TRUE(rec->error.empty());
}

}  // namespace
}  // namespace kvroute::sim

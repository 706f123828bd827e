// The proxy's lanes and its compute pool (ProxyTest, proxy_test_fixture.h; instantiated over
// the three lane setups in proxy_test.cc): a stream keeps flowing while another request on its
// lane is prepared, and a route is booked on the compute thread before the lane resumes.

#include "gateway/proxy/proxy_test_fixture.h"

namespace kvroute::gateway::proxytest {
namespace {

// The reason for the compute pool: while one request on a lane is being prepared (parsed,
// tokenized), the streams relayed on that lane keep flowing. The slow request's tokenizer is
// held until the other stream has delivered 100 more events (500 ms of the fake worker's
// output); with Prepare inline on the one lane, that lane would be stuck in the tokenizer and
// the stream would deliver only what was already in its socket.
TEST_P(ProxyTest, AStreamKeepsFlowingWhileAnotherRequestOnItsLaneIsPrepared) {
  if (!GetParam().shared_lane || GetParam().compute_threads == 0) {
    GTEST_SKIP() << "needs the stream and the slow request on one lane, and a compute pool";
  }
  FakeWorker w(FakeWorker::Mode::kStreamForever);
  Start({&w});
  net::testing::TestClient streaming;
  ASSERT_TRUE(streaming.Connect(front_->port()));
  streaming.Send(net::testing::TestClient::Post(
      "/v1/completions", R"({"model":"m","prompt":"x","stream":true})", false));
  std::string got = streaming.ReadSome(100, seconds(5));
  ASSERT_NE(got.find("200"), std::string::npos);

  net::testing::TestClient slow;
  ASSERT_TRUE(slow.Connect(front_->port()));
  slow.Send(net::testing::TestClient::Post("/v1/completions",
                                           R"({"model":"m","prompt":"SLOW one"})", false));
  ASSERT_TRUE(tokenizer_->WaitEntered(seconds(5)));

  // The tokenizer is held from here until Release below.
  std::size_t events = 0;
  for (int i = 0; i < 200 && events < 100; ++i) {
    std::string piece = streaming.ReadSome(4096, milliseconds(50));
    for (std::size_t at = piece.find("data: "); at != std::string::npos;
         at = piece.find("data: ", at + 1)) {
      ++events;
    }
  }
  tokenizer_->Release();
  EXPECT_GE(events, 100u);
  streaming.Close();
  slow.Close();
  EXPECT_EQ(InflightAfterItDrains(), 0u);
}

// A route's load is booked where it is decided (the compute thread), not after the hand-off
// back to the lane: while the lane is held busy, the router already counts the request in
// flight, so the next decision on any thread sees it. (Booked on the lane, requests arriving
// together were all decided on the same idle snapshot.)
TEST_P(ProxyTest, ARouteIsBookedBeforeTheLaneResumes) {
  if (!GetParam().shared_lane || GetParam().compute_threads == 0) {
    GTEST_SKIP() << "needs a lane the test can hold and a compute pool";
  }
  FakeWorker w(FakeWorker::Mode::kJsonNever);
  Start({&w});
  net::testing::TestClient c;
  ASSERT_TRUE(c.Connect(front_->port()));
  c.Send(net::testing::TestClient::Post("/v1/completions", R"({"model":"m","prompt":"SLOW x"})",
                                        false));
  ASSERT_TRUE(tokenizer_->WaitEntered(seconds(5)));  // handed off: the lane is free again
  std::mutex mu;
  std::condition_variable cv;
  bool holding = false, release = false;
  boost::asio::post(lanes_->context(0), [&] {
    std::unique_lock lock(mu);
    holding = true;
    cv.notify_all();
    cv.wait_for(lock, seconds(10), [&] { return release; });
  });
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, seconds(5), [&] { return holding; }));
  }
  tokenizer_->Release();
  for (int i = 0; i < 200 && router_state_.load().inflight() == 0; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_EQ(router_state_.load().inflight(), 1u);  // the lane has not resumed the exchange yet
  EXPECT_EQ(w.requests.load(), 0);
  {
    std::lock_guard lock(mu);
    release = true;
    cv.notify_all();
  }
  for (int i = 0; i < 200 && w.requests.load() == 0; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_EQ(w.requests.load(), 1);
  c.Close();
  EXPECT_EQ(InflightAfterItDrains(), 0u);
}

}  // namespace
}  // namespace kvroute::gateway::proxytest

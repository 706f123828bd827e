// The proxy's pure rules: when to retry, which outcomes are attempt failures, the request id.

#include <gtest/gtest.h>

#include "gateway/proxy/proxy.h"

namespace kvroute::gateway {
namespace {

TEST(DecideRetry, RetriesWhileNothingWasSentAndAttemptsRemain) {
  EXPECT_EQ(DecideRetry(AttemptFailure::kConnect, false, 1, 3), RetryDecision::kRetry);
  EXPECT_EQ(DecideRetry(AttemptFailure::kUnavailable, false, 2, 3), RetryDecision::kRetry);
  EXPECT_EQ(DecideRetry(AttemptFailure::kFirstByteTimeout, false, 1, 2), RetryDecision::kRetry);
}

TEST(DecideRetry, NeverRetriesOnceTheClientSawBytes) {
  for (auto f : {AttemptFailure::kConnect, AttemptFailure::kClosed, AttemptFailure::kIdleTimeout,
                 AttemptFailure::kUnavailable, AttemptFailure::kProtocol}) {
    EXPECT_EQ(DecideRetry(f, true, 1, 3), RetryDecision::kGiveUp) << AttemptFailureName(f);
  }
}

TEST(DecideRetry, GivesUpAfterMaxAttempts) {
  EXPECT_EQ(DecideRetry(AttemptFailure::kConnect, false, 3, 3), RetryDecision::kGiveUp);
  EXPECT_EQ(DecideRetry(AttemptFailure::kConnect, false, 1, 1), RetryDecision::kGiveUp);
}

TEST(FailureOfStatus, ServerErrorsAreAttemptFailuresAndAnswersAreNot) {
  EXPECT_EQ(FailureOfStatus(500), AttemptFailure::kServerError);
  for (int s : {502, 503, 504}) EXPECT_EQ(FailureOfStatus(s), AttemptFailure::kUnavailable) << s;
  for (int s : {200, 400, 404, 413, 429, 501}) EXPECT_FALSE(FailureOfStatus(s).has_value()) << s;
}

TEST(FailureOf, MapsClientErrorsToAttemptFailures) {
  EXPECT_EQ(FailureOf(client::ErrorKind::kConnectRefused), AttemptFailure::kConnect);
  EXPECT_EQ(FailureOf(client::ErrorKind::kConnectTimeout), AttemptFailure::kConnect);
  EXPECT_EQ(FailureOf(client::ErrorKind::kFirstByteTimeout), AttemptFailure::kFirstByteTimeout);
  EXPECT_EQ(FailureOf(client::ErrorKind::kClosedEarly), AttemptFailure::kClosed);
  EXPECT_EQ(FailureOf(client::ErrorKind::kIdleTimeout), AttemptFailure::kIdleTimeout);
}

TEST(RequestIdFor, KeepsASaneClientIdAndGeneratesOtherwise) {
  net::HttpRequest r;
  r.headers = {{"x-request-id", "abc-123"}};
  EXPECT_EQ(RequestIdFor(r), "abc-123");
  r.headers = {{"x-request-id", "bad id with spaces"}};
  EXPECT_EQ(RequestIdFor(r).size(), 32u);
  r.headers.clear();
  EXPECT_NE(RequestIdFor(r), RequestIdFor(r));
}


}  // namespace
}  // namespace kvroute::gateway

// One ext_proc stream as the Endpoint Picker protocol orders it, driven message by message
// without gRPC or Envoy (neither runs here).
#include "extproc/epp_stream.h"

#include <gtest/gtest.h>

namespace kvroute::extproc {
namespace {

pb::ProcessingRequest Headers(bool end_of_stream, std::vector<std::pair<std::string, std::string>> h = {}) {
  pb::ProcessingRequest r;
  for (auto& [k, v] : h) {
    auto* hv = r.mutable_request_headers()->mutable_headers()->add_headers();
    hv->set_key(k);
    hv->set_raw_value(v);
  }
  r.mutable_request_headers()->set_end_of_stream(end_of_stream);
  return r;
}
pb::ProcessingRequest Body(const std::string& b, bool end_of_stream, bool request = true) {
  pb::ProcessingRequest r;
  auto* body = request ? r.mutable_request_body() : r.mutable_response_body();
  body->set_body(b);
  body->set_end_of_stream(end_of_stream);
  return r;
}
Picker Fixed(std::vector<std::string> endpoints, PickRequest* seen = nullptr) {
  return [endpoints, seen](const PickRequest& r) {
    if (seen) *seen = r;
    return PickResult{.endpoints = endpoints};
  };
}
std::string DestinationOf(const pb::ProcessingResponse& r) {
  return r.request_headers().response().header_mutation().set_headers(0).header().raw_value();
}

TEST(EppStream, AnswersHeadersOnlyAfterTheWholeBodyThenStreamsTheBody) {
  PickRequest seen;
  EppStream s(Fixed({"10.0.0.1:8000", "10.0.0.2:8000"}, &seen));
  EXPECT_TRUE(s.OnMessage(Headers(false, {{":path", "/v1/chat/completions"}})).empty());
  EXPECT_TRUE(s.OnMessage(Body(R"({"model":)", false)).empty());
  auto out = s.OnMessage(Body(R"("m"})", true));
  ASSERT_EQ(out.size(), 2u);
  ASSERT_TRUE(out[0].has_request_headers());
  EXPECT_EQ(DestinationOf(out[0]), "10.0.0.1:8000,10.0.0.2:8000");
  ASSERT_TRUE(out[1].has_request_body());
  EXPECT_EQ(out[1].request_body().response().body_mutation().streamed_response().body(), R"({"model":"m"})");
  EXPECT_TRUE(out[1].request_body().response().body_mutation().streamed_response().end_of_stream());
  EXPECT_EQ(seen.body, R"({"model":"m"})");
  EXPECT_EQ(seen.headers.at(":path"), "/v1/chat/completions");
}

TEST(EppStream, RequestWithoutBodyIsPickedAtTheHeaders) {
  EppStream s(Fixed({"10.0.0.1:8000"}));
  auto out = s.OnMessage(Headers(true));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(DestinationOf(out[0]), "10.0.0.1:8000");
}

TEST(EppStream, SubsetHintRestrictsThePickAndAnEmptyOneIs503) {
  google::protobuf::Value v;
  v.set_string_value("10.0.0.2:8000");
  pb::ProcessingRequest h = Headers(true);
  (*(*h.mutable_metadata_context()->mutable_filter_metadata())["envoy.lb.subset_hint"].mutable_fields())
      ["x-gateway-destination-endpoint-subset"] = v;
  EppStream s(Fixed({"10.0.0.1:8000", "10.0.0.2:8000"}));
  EXPECT_EQ(DestinationOf(s.OnMessage(h)[0]), "10.0.0.2:8000");

  v.set_string_value("");
  (*(*h.mutable_metadata_context()->mutable_filter_metadata())["envoy.lb.subset_hint"].mutable_fields())
      ["x-gateway-destination-endpoint-subset"] = v;
  EppStream empty(Fixed({"10.0.0.1:8000"}));
  auto out = empty.OnMessage(h);
  ASSERT_TRUE(out[0].has_immediate_response());
  EXPECT_EQ(out[0].immediate_response().status().code(), 503);
  EXPECT_TRUE(empty.finished());
}

TEST(EppStream, NoEndpointIs503AndRejectionIsItsStatus) {
  EppStream none(Fixed({}));
  EXPECT_EQ(none.OnMessage(Headers(true))[0].immediate_response().status().code(), 503);
  EppStream shed([](const PickRequest&) { return PickResult{.reject_status = 429, .reject_message = "shed"}; });
  auto out = shed.OnMessage(Headers(true));
  EXPECT_EQ(out[0].immediate_response().status().code(), 429);
  EXPECT_TRUE(shed.OnMessage(Body("x", true)).empty());  // nothing after an immediate response
}

TEST(EppStream, OversizedBodyIs413) {
  EppStream s(Fixed({"10.0.0.1:8000"}), /*max_body_bytes=*/4);
  s.OnMessage(Headers(false));
  EXPECT_EQ(s.OnMessage(Body("12345", false))[0].immediate_response().status().code(), 413);
}

TEST(EppStream, ResponsePathEchoesChunksAndRecordsServedEndpoint) {
  EppStream s(Fixed({"10.0.0.1:8000"}));
  s.OnMessage(Headers(true));
  pb::ProcessingRequest rh;
  auto* hv = rh.mutable_response_headers()->mutable_headers()->add_headers();
  hv->set_key("content-type");
  hv->set_raw_value("text/event-stream");
  google::protobuf::Value served;
  served.set_string_value("10.0.0.1:8000");
  (*(*rh.mutable_metadata_context()->mutable_filter_metadata())["envoy.lb"].mutable_fields())
      ["x-gateway-destination-endpoint-served"] = served;
  auto h = s.OnMessage(rh);
  ASSERT_EQ(h.size(), 1u);
  EXPECT_TRUE(h[0].has_response_headers());
  EXPECT_TRUE(s.response_is_sse());
  EXPECT_EQ(s.served_endpoint(), "10.0.0.1:8000");
  auto mid = s.OnMessage(Body("data: {}\n\n", false, /*request=*/false));
  ASSERT_EQ(mid.size(), 1u);
  EXPECT_EQ(mid[0].response_body().response().body_mutation().streamed_response().body(), "data: {}\n\n");
  EXPECT_FALSE(mid[0].response_body().response().body_mutation().streamed_response().end_of_stream());
  auto last = s.OnMessage(Body("data: [DONE]\n\n", true, /*request=*/false));
  EXPECT_TRUE(last[0].response_body().response().body_mutation().streamed_response().end_of_stream());
}

pb::ProcessingRequest ResponseHeaders(const std::string& content_type) {
  pb::ProcessingRequest rh;
  auto* hv = rh.mutable_response_headers()->mutable_headers()->add_headers();
  hv->set_key("content-type");
  hv->set_raw_value(content_type);
  return rh;
}

TEST(EppStream, SseUsageIsReadAsItStreamsEvenAcrossChunkBoundaries) {
  EppStream s(Fixed({"10.0.0.1:8000"}));
  s.OnMessage(Headers(true));
  s.OnMessage(ResponseHeaders("text/event-stream"));
  s.OnMessage(Body("data: {\"choices\":[]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_to", false, false));
  EXPECT_FALSE(s.usage().has_value());
  s.OnMessage(Body("kens\":12,\"completion_tokens\":3}}\n\n", false, false));
  ASSERT_TRUE(s.usage().has_value());
  EXPECT_EQ(s.usage()->prompt_tokens, 12);
  EXPECT_EQ(s.usage()->completion_tokens, 3);
  s.OnMessage(Body("data: [DONE]\n\n", true, false));
  EXPECT_EQ(s.usage()->completion_tokens, 3);
}

TEST(EppStream, JsonUsageIsReadAtTheEndOfANonStreamedAnswer) {
  EppStream s(Fixed({"10.0.0.1:8000"}));
  s.OnMessage(Headers(true));
  s.OnMessage(ResponseHeaders("application/json"));
  s.OnMessage(Body("{\"choices\":[],\"usage\":{\"prompt_tokens\":7,", false, false));
  EXPECT_FALSE(s.usage().has_value());
  s.OnMessage(Body("\"completion_tokens\":2}}", true, false));
  ASSERT_TRUE(s.usage().has_value());
  EXPECT_EQ(s.usage()->prompt_tokens, 7);
}


// What a booking picker hears: the response's status, SSE, served endpoint, every chunk, then
// the end — with whether the destination reached the gateway.
struct Recorder final : PickSession {
  struct Log {
    int status = -1;
    bool sse = false;
    std::optional<std::string> served;
    std::string body;
    int ends = 0;
    bool complete = false, sent = false;
  };
  explicit Recorder(Log* l) : log(l) {}
  PickResult Pick(const PickRequest&) override { return PickResult{.endpoints = {"10.0.0.1:8000"}}; }
  void OnResponseHeaders(int status, bool sse, const std::optional<std::string>& served) override {
    log->status = status;
    log->sse = sse;
    log->served = served;
  }
  void OnResponseBody(std::string_view bytes, bool) override { log->body += bytes; }
  void OnStreamEnd(bool complete, bool sent) override {
    ++log->ends;
    log->complete = complete;
    log->sent = sent;
  }
  Log* log;
};

pb::ProcessingRequest StatusHeaders(const std::string& status) {
  pb::ProcessingRequest r;
  for (auto [k, v] : {std::pair{":status", status}, {"content-type", std::string("text/event-stream")}}) {
    auto* hv = r.mutable_response_headers()->mutable_headers()->add_headers();
    hv->set_key(k);
    hv->set_raw_value(v);
  }
  return r;
}

TEST(EppStream, SessionHearsTheResponseInOrderAndTheEndOnce) {
  Recorder::Log log;
  {
    EppStream s(std::make_unique<Recorder>(&log));
    s.OnMessage(Headers(false));
    EXPECT_EQ(s.OnMessage(Body("{}", true)).size(), 2u);
    s.MarkSent(true);
    s.OnMessage(StatusHeaders("200"));
    s.OnMessage(Body("data: a\n\n", false, /*request=*/false));
    s.OnMessage(Body("data: [DONE]\n\n", true, /*request=*/false));
    s.End();
    s.End();
  }
  EXPECT_EQ(log.status, 200);
  EXPECT_TRUE(log.sse);
  EXPECT_EQ(log.body, "data: a\n\ndata: [DONE]\n\n");
  EXPECT_EQ(log.ends, 1);
  EXPECT_TRUE(log.complete);
  EXPECT_TRUE(log.sent);
}

TEST(EppStream, AStreamCutBeforeTheDestinationWasWrittenSaysSo) {
  Recorder::Log log;
  {
    EppStream s(std::make_unique<Recorder>(&log));
    s.OnMessage(Headers(false));
    s.OnMessage(Body("{}", true));
    s.MarkSent(false);  // the gateway was gone
  }  // destroyed without End(): the destructor ends it
  EXPECT_EQ(log.ends, 1);
  EXPECT_FALSE(log.complete);
  EXPECT_FALSE(log.sent);
}

}  // namespace
}  // namespace kvroute::extproc

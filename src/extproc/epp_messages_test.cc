// The picker's ext_proc messages built and read in memory. No Envoy runs here; the same bytes
// are decoded by @grpc/proto-loader in tests/integration/extproc.
#include "extproc/epp_messages.h"

#include <gtest/gtest.h>

namespace kvroute::extproc {
namespace {

TEST(DestinationResponse, HeaderAndEnvoyLbMetadataCarryTheSameOrderedList) {
  pb::ProcessingResponse r = DestinationResponse({"10.0.0.1:8000", "10.0.0.2:8000"}, 1234);
  ASSERT_TRUE(r.has_request_headers());
  const pb::CommonResponse& c = r.request_headers().response();
  EXPECT_TRUE(c.clear_route_cache());
  ASSERT_EQ(c.header_mutation().set_headers_size(), 2);
  EXPECT_EQ(c.header_mutation().set_headers(0).header().key(), "x-gateway-destination-endpoint");
  EXPECT_EQ(c.header_mutation().set_headers(0).header().raw_value(), "10.0.0.1:8000,10.0.0.2:8000");
  EXPECT_EQ(c.header_mutation().set_headers(1).header().key(), "content-length");
  EXPECT_EQ(c.header_mutation().set_headers(1).header().raw_value(), "1234");
  const auto& lb = r.dynamic_metadata().fields().at("envoy.lb").struct_value();
  EXPECT_EQ(lb.fields().at("x-gateway-destination-endpoint").string_value(), "10.0.0.1:8000,10.0.0.2:8000");
}

TEST(DestinationResponse, NoContentLengthWhenNotGiven) {
  pb::ProcessingResponse r = DestinationResponse({"10.0.0.1:8000"}, std::nullopt);
  EXPECT_EQ(r.request_headers().response().header_mutation().set_headers_size(), 1);
}

TEST(StreamedBody, ChunksAtMost62000BytesLastEndsTheStream) {
  std::string body(150000, 'x');
  auto chunks = StreamedBody(body, /*request=*/true);
  ASSERT_EQ(chunks.size(), 3u);
  std::string joined;
  for (size_t i = 0; i < chunks.size(); ++i) {
    ASSERT_TRUE(chunks[i].has_request_body());
    const auto& s = chunks[i].request_body().response().body_mutation().streamed_response();
    EXPECT_LE(s.body().size(), kMaxBodyChunk);
    EXPECT_EQ(s.end_of_stream(), i + 1 == chunks.size());
    joined += s.body();
  }
  EXPECT_EQ(joined, body);
}

TEST(StreamedBody, EmptyBodyIsOneFinalChunkAndResponsePathUsesResponseBody) {
  auto chunks = StreamedBody("", /*request=*/false);
  ASSERT_EQ(chunks.size(), 1u);
  ASSERT_TRUE(chunks[0].has_response_body());
  EXPECT_TRUE(chunks[0].response_body().response().body_mutation().streamed_response().end_of_stream());
}

TEST(Immediate, CarriesStatusBodyAndDetails) {
  pb::ProcessingResponse r = Immediate(429, "request evicted by flow control", "shed");
  ASSERT_TRUE(r.has_immediate_response());
  EXPECT_EQ(r.immediate_response().status().code(), 429);
  EXPECT_EQ(r.immediate_response().body(), "request evicted by flow control");
  EXPECT_EQ(r.immediate_response().details(), "shed");
}

pb::ProcessingRequest WithMetadata(const std::string& ns, const std::string& key,
                                   const google::protobuf::Value& v) {
  pb::ProcessingRequest r;
  (*(*r.mutable_metadata_context()->mutable_filter_metadata())[ns].mutable_fields())[key] = v;
  return r;
}

TEST(SubsetHint, ListAndCommaStringFormsAndAbsence) {
  google::protobuf::Value list;
  list.mutable_list_value()->add_values()->set_string_value("10.0.0.1:8000");
  list.mutable_list_value()->add_values()->set_string_value("10.0.0.2:8000");
  EXPECT_EQ(SubsetHint(WithMetadata("envoy.lb.subset_hint", "x-gateway-destination-endpoint-subset", list)),
            (std::vector<std::string>{"10.0.0.1:8000", "10.0.0.2:8000"}));
  google::protobuf::Value comma;
  comma.set_string_value("10.0.0.3:8000, 10.0.0.4:8000");
  EXPECT_EQ(SubsetHint(WithMetadata("envoy.lb.subset_hint", "x-gateway-destination-endpoint-subset", comma)),
            (std::vector<std::string>{"10.0.0.3:8000", "10.0.0.4:8000"}));
  google::protobuf::Value empty;
  empty.set_string_value("");
  auto e = SubsetHint(WithMetadata("envoy.lb.subset_hint", "x-gateway-destination-endpoint-subset", empty));
  ASSERT_TRUE(e.has_value());  // present but empty: the picker must answer 503
  EXPECT_TRUE(e->empty());
  EXPECT_FALSE(SubsetHint(pb::ProcessingRequest{}).has_value());
}

TEST(ServedEndpoint, ReadFromEnvoyLbMetadata) {
  google::protobuf::Value v;
  v.set_string_value("10.0.0.2:8000");
  EXPECT_EQ(ServedEndpoint(WithMetadata("envoy.lb", "x-gateway-destination-endpoint-served", v)), "10.0.0.2:8000");
  EXPECT_FALSE(ServedEndpoint(pb::ProcessingRequest{}).has_value());
}

TEST(HeaderValue, PrefersRawValueAsEnvoySendsIt) {
  pb::HttpHeaders h;
  auto* a = h.mutable_headers()->add_headers();
  a->set_key(":path");
  a->set_raw_value("/v1/chat/completions");
  auto* b = h.mutable_headers()->add_headers();
  b->set_key("x-old");
  b->set_value("v");
  EXPECT_EQ(HeaderValue(h, ":path"), "/v1/chat/completions");
  EXPECT_EQ(HeaderValue(h, "x-old"), "v");
  EXPECT_FALSE(HeaderValue(h, "absent").has_value());
}

}  // namespace
}  // namespace kvroute::extproc

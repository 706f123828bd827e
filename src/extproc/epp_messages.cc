#include "extproc/epp_messages.h"

#include <algorithm>

namespace kvroute::extproc {
namespace {

namespace core = ::envoy::config::core::v3;

void SetHeader(pb::HeaderMutation* m, std::string_view key, std::string_view value) {
  core::HeaderValueOption* opt = m->add_set_headers();
  opt->mutable_header()->set_key(std::string(key));
  opt->mutable_header()->set_raw_value(std::string(value));
  opt->set_append_action(core::HeaderValueOption::OVERWRITE_IF_EXISTS_OR_ADD);
}

std::vector<std::string> SplitComma(std::string_view s) {
  std::vector<std::string> out;
  while (!s.empty()) {
    size_t comma = s.find(',');
    std::string_view part = s.substr(0, comma);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
    if (!part.empty()) out.emplace_back(part);
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  return out;
}

const google::protobuf::Value* MetadataValue(const pb::ProcessingRequest& r, std::string_view ns,
                                             std::string_view key) {
  const auto& fm = r.metadata_context().filter_metadata();
  auto it = fm.find(std::string(ns));
  if (it == fm.end()) return nullptr;
  auto v = it->second.fields().find(std::string(key));
  return v == it->second.fields().end() ? nullptr : &v->second;
}

}  // namespace

pb::ProcessingResponse DestinationResponse(const std::vector<std::string>& endpoints,
                                           std::optional<std::size_t> content_length) {
  std::string joined;
  for (const auto& e : endpoints) joined += (joined.empty() ? "" : ",") + e;
  pb::ProcessingResponse r;
  pb::CommonResponse* common = r.mutable_request_headers()->mutable_response();
  common->set_clear_route_cache(true);
  SetHeader(common->mutable_header_mutation(), kDestinationHeader, joined);
  if (content_length) {
    SetHeader(common->mutable_header_mutation(), "content-length", std::to_string(*content_length));
  }
  google::protobuf::Struct lb;
  (*lb.mutable_fields())[std::string(kDestinationHeader)].set_string_value(joined);
  (*(*r.mutable_dynamic_metadata()->mutable_fields())[std::string(kLbNamespace)].mutable_struct_value()) = lb;
  return r;
}

std::vector<pb::ProcessingResponse> StreamedBody(std::string_view body, bool request,
                                                 std::size_t max_chunk) {
  std::vector<pb::ProcessingResponse> out;
  max_chunk = std::max<std::size_t>(max_chunk, 1);
  std::size_t pos = 0;
  do {
    std::size_t n = std::min(max_chunk, body.size() - pos);
    pb::ProcessingResponse r;
    pb::BodyResponse* b = request ? r.mutable_request_body() : r.mutable_response_body();
    pb::StreamedBodyResponse* s = b->mutable_response()->mutable_body_mutation()->mutable_streamed_response();
    s->set_body(std::string(body.substr(pos, n)));
    pos += n;
    s->set_end_of_stream(pos == body.size());
    out.push_back(std::move(r));
  } while (pos < body.size());
  return out;
}

pb::ProcessingResponse Immediate(int http_status, std::string_view body, std::string_view details) {
  pb::ProcessingResponse r;
  pb::ImmediateResponse* i = r.mutable_immediate_response();
  i->mutable_status()->set_code(static_cast<::envoy::type::v3::StatusCode>(http_status));
  i->set_body(std::string(body));
  i->set_details(std::string(details));
  return r;
}

std::optional<std::string> HeaderValue(const pb::HttpHeaders& headers, std::string_view name) {
  for (const auto& h : headers.headers().headers()) {
    if (h.key() == name) return h.raw_value().empty() ? h.value() : h.raw_value();
  }
  return std::nullopt;
}

std::optional<std::vector<std::string>> SubsetHint(const pb::ProcessingRequest& request) {
  const google::protobuf::Value* v = MetadataValue(request, kSubsetNamespace, kSubsetKey);
  if (v == nullptr) return std::nullopt;
  std::vector<std::string> out;
  if (v->has_list_value()) {
    for (const auto& e : v->list_value().values()) {
      for (auto& part : SplitComma(e.string_value())) out.push_back(std::move(part));
    }
  } else {
    out = SplitComma(v->string_value());
  }
  return out;
}

std::optional<std::string> ServedEndpoint(const pb::ProcessingRequest& request) {
  const google::protobuf::Value* v = MetadataValue(request, kLbNamespace, kServedKey);
  if (v == nullptr || v->string_value().empty()) return std::nullopt;
  return v->string_value();
}

}  // namespace kvroute::extproc

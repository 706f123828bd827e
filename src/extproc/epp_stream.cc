#include "extproc/epp_stream.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>

namespace kvroute::extproc {

namespace {

// A plain Picker as a session that hears nothing of the response.
class PickerSession final : public PickSession {
 public:
  explicit PickerSession(Picker picker) : picker_(std::move(picker)) {}
  PickResult Pick(const PickRequest& request) override { return picker_(request); }

 private:
  Picker picker_;
};

int StatusOf(const pb::HttpHeaders& headers) {
  auto s = HeaderValue(headers, ":status");
  if (!s) return 0;
  try {
    return std::stoi(*s);
  } catch (...) {
    return 0;
  }
}

}  // namespace

EppStream::EppStream(Picker picker, std::size_t max_body_bytes)
    : EppStream(std::make_unique<PickerSession>(std::move(picker)), max_body_bytes) {}

EppStream::EppStream(std::unique_ptr<PickSession> session, std::size_t max_body_bytes)
    : session_(std::move(session)), max_body_bytes_(max_body_bytes) {}

EppStream::~EppStream() { End(); }

void EppStream::MarkSent(bool ok) {
  if (destination_pending_ && ok) destination_sent_ = true;
  destination_pending_ = false;
}

void EppStream::End() {
  if (ended_) return;
  ended_ = true;
  session_->OnStreamEnd(response_complete_, destination_sent_);
}

std::vector<pb::ProcessingResponse> EppStream::Finish(pb::ProcessingResponse r) {
  finished_ = true;
  std::vector<pb::ProcessingResponse> out;
  out.push_back(std::move(r));
  return out;
}

void EppStream::ReadUsage(std::string_view json) {
  if (json.find("\"usage\"") == std::string_view::npos) return;
  google::protobuf::Struct doc;
  if (!google::protobuf::util::JsonStringToMessage(std::string(json), &doc).ok()) return;
  auto it = doc.fields().find("usage");
  if (it == doc.fields().end() || !it->second.has_struct_value()) return;
  const auto& u = it->second.struct_value().fields();
  Usage out;
  if (auto p = u.find("prompt_tokens"); p != u.end()) out.prompt_tokens = static_cast<long>(p->second.number_value());
  if (auto c = u.find("completion_tokens"); c != u.end()) {
    out.completion_tokens = static_cast<long>(c->second.number_value());
  }
  usage_ = out;
}

void EppStream::ObserveResponse(const std::string& bytes, bool end_of_stream) {
  if (response_buffer_.size() + bytes.size() > max_body_bytes_) {
    response_buffer_.clear();  // an over-long line or body: usage is not read, bytes still flow
    return;
  }
  response_buffer_ += bytes;
  if (!sse_) {
    if (end_of_stream) ReadUsage(response_buffer_);
    return;
  }
  std::size_t start = 0;
  for (std::size_t nl; (nl = response_buffer_.find('\n', start)) != std::string::npos; start = nl + 1) {
    std::string_view line(response_buffer_.data() + start, nl - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.starts_with("data:")) {
      line.remove_prefix(5);
      while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
      if (line != "[DONE]") ReadUsage(line);
    }
  }
  response_buffer_.erase(0, start);
}

std::vector<pb::ProcessingResponse> EppStream::Pick(bool with_body) {
  if (request_.subset && request_.subset->empty()) {
    return Finish(Immediate(503, "no endpoint in the subset hint", "epp_empty_subset"));
  }
  PickResult result = session_->Pick(request_);
  if (result.reject_status != 0) {
    return Finish(Immediate(result.reject_status, result.reject_message, "epp_rejected"));
  }
  std::vector<std::string> endpoints;
  for (auto& e : result.endpoints) {
    bool allowed = !request_.subset ||
                   std::find(request_.subset->begin(), request_.subset->end(), e) != request_.subset->end();
    if (allowed) endpoints.push_back(std::move(e));
  }
  if (endpoints.empty()) return Finish(Immediate(503, "no ready endpoint", "epp_no_endpoint"));
  picked_ = endpoints;
  destination_pending_ = true;
  std::vector<pb::ProcessingResponse> out;
  const std::string& body = result.body ? *result.body : request_.body;
  out.push_back(DestinationResponse(endpoints, with_body ? std::optional(body.size()) : std::nullopt));
  if (with_body) {
    for (auto& chunk : StreamedBody(body, /*request=*/true)) out.push_back(std::move(chunk));
  }
  return out;
}

std::vector<pb::ProcessingResponse> EppStream::OnMessage(const pb::ProcessingRequest& r) {
  if (finished_) return {};
  switch (r.request_case()) {
    case pb::ProcessingRequest::kRequestHeaders: {
      for (const auto& h : r.request_headers().headers().headers()) {
        request_.headers[h.key()] = h.raw_value().empty() ? h.value() : h.raw_value();
      }
      request_.subset = SubsetHint(r);
      if (r.request_headers().end_of_stream()) return Pick(/*with_body=*/false);
      return {};  // FULL_DUPLEX_STREAMED: answer once the body is complete
    }
    case pb::ProcessingRequest::kRequestBody: {
      request_.body += r.request_body().body();
      if (request_.body.size() > max_body_bytes_) {
        return Finish(Immediate(413, "request body too large", "epp_body_limit"));
      }
      if (r.request_body().end_of_stream()) return Pick(/*with_body=*/true);
      return {};
    }
    case pb::ProcessingRequest::kRequestTrailers: {
      pb::ProcessingResponse out;
      out.mutable_request_trailers();
      return {out};
    }
    case pb::ProcessingRequest::kResponseHeaders: {
      if (auto s = ServedEndpoint(r)) served_ = *s;
      auto ct = HeaderValue(r.response_headers(), "content-type");
      sse_ = ct && ct->starts_with("text/event-stream");
      session_->OnResponseHeaders(StatusOf(r.response_headers()), sse_, served_);
      if (r.response_headers().end_of_stream()) response_complete_ = true;
      pb::ProcessingResponse out;
      out.mutable_response_headers()->mutable_response();
      return {out};
    }
    case pb::ProcessingRequest::kResponseBody: {
      if (auto s = ServedEndpoint(r)) served_ = *s;
      const auto& b = r.response_body();
      ObserveResponse(b.body(), b.end_of_stream());
      session_->OnResponseBody(b.body(), b.end_of_stream());
      if (b.end_of_stream()) response_complete_ = true;
      auto chunks = StreamedBody(b.body(), /*request=*/false);
      if (!b.end_of_stream()) {
        chunks.back().mutable_response_body()->mutable_response()->mutable_body_mutation()
            ->mutable_streamed_response()->set_end_of_stream(false);
      }
      return chunks;
    }
    case pb::ProcessingRequest::kResponseTrailers: {
      pb::ProcessingResponse out;
      out.mutable_response_trailers();
      return {out};
    }
    default:
      return {};
  }
}

}  // namespace kvroute::extproc

// kvroute_extproc_wire: a test helper for tests/integration/extproc (not installed).
//   kvroute_extproc_wire encode DIR   writes the picker's messages, one serialized
//                                     ProcessingResponse per file (names listed on stdout)
//   kvroute_extproc_wire decode FILE  parses one serialized ProcessingRequest and prints what
//                                     the picker reads from it, one `key value` per line
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>

#include "extproc/epp_messages.h"

namespace {

using namespace kvroute::extproc;

bool Write(const std::string& dir, const std::string& name, const pb::ProcessingResponse& r) {
  std::ofstream out(dir + "/" + name, std::ios::binary);
  if (!out || !r.SerializeToOstream(&out)) return false;
  std::cout << name << "\n";
  return true;
}

int Encode(const std::string& dir) {
  bool ok = Write(dir, "destination.bin", DestinationResponse({"10.0.0.1:8000", "10.0.0.2:8000"}, 150000));
  int i = 0;
  for (const auto& c : StreamedBody(std::string(150000, 'b'), /*request=*/true)) {
    ok = ok && Write(dir, "request_body_" + std::to_string(i++) + ".bin", c);
  }
  ok = ok && Write(dir, "response_body_0.bin", StreamedBody("data: {}\n\n", /*request=*/false)[0]);
  ok = ok && Write(dir, "immediate_503.bin", Immediate(503, "no ready endpoint", "no_endpoint"));
  ok = ok && Write(dir, "immediate_429.bin", Immediate(429, "request evicted by flow control", "shed"));
  return ok ? 0 : 1;
}

int Decode(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  std::string bytes(std::istreambuf_iterator<char>(in), {});
  pb::ProcessingRequest r;
  if (!in.is_open() || !r.ParseFromString(bytes)) {
    std::cerr << file << ": not a ProcessingRequest\n";
    return 1;
  }
  const char* kinds[] = {"", "", "request_headers", "response_headers", "request_body",
                         "response_body", "request_trailers", "response_trailers"};
  int k = static_cast<int>(r.request_case());
  std::cout << "kind " << (k > 0 && k < 8 ? kinds[k] : "none") << "\n";
  const pb::HttpHeaders* h = r.has_request_headers() ? &r.request_headers()
                             : r.has_response_headers() ? &r.response_headers() : nullptr;
  if (h != nullptr) {
    for (const auto& hv : h->headers().headers()) {
      std::cout << "header " << hv.key() << "=" << *HeaderValue(*h, hv.key()) << "\n";
    }
    std::cout << "end_of_stream " << h->end_of_stream() << "\n";
  }
  if (r.has_request_body()) {
    std::cout << "body_bytes " << r.request_body().body().size() << "\nend_of_stream "
              << r.request_body().end_of_stream() << "\n";
  }
  if (auto s = SubsetHint(r)) {
    std::cout << "subset";
    for (const auto& e : *s) std::cout << " " << e;
    std::cout << "\n";
  }
  if (auto s = ServedEndpoint(r)) std::cout << "served " << *s << "\n";
  if (r.has_protocol_config()) {
    std::cout << "request_body_mode " << r.protocol_config().request_body_mode() << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string cmd = argc > 2 ? argv[1] : "";
  if (cmd == "encode") return Encode(argv[2]);
  if (cmd == "decode") return Decode(argv[2]);
  std::cerr << "usage: kvroute_extproc_wire encode DIR | decode FILE\n";
  return 2;
}

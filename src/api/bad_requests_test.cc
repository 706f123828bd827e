// Runs the shared bad-request corpus (testdata/bad_requests.json) through the parsers: every
// case must be refused with the listed status and `param`. The gateway's integration tests
// replay the same file against a live server.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "api/chat_request.h"
#include "api/completion_request.h"
#include "api/tokenize_api.h"

namespace kvroute::api {
namespace {

boost::json::array LoadCorpus() {
  std::ifstream in(std::string(KVROUTE_API_TESTDATA) + "/bad_requests.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return boost::json::parse(ss.str()).as_array();
}

std::expected<void, ApiError> Parse(std::string_view path, std::string_view body) {
  auto drop = [](auto&& r) -> std::expected<void, ApiError> {
    if (!r) return std::unexpected(r.error());
    return {};
  };
  if (path == "/v1/completions") return drop(ParseCompletionRequest(body));
  if (path == "/v1/chat/completions") return drop(ParseChatCompletionRequest(body));
  if (path == "/tokenize") return drop(ParseTokenizeRequest(body));
  if (path == "/detokenize") return drop(ParseDetokenizeRequest(body));
  ADD_FAILURE() << "unknown path " << path;
  return {};
}

TEST(BadRequestCorpus, HasAtLeastFortyDistinctCases) {
  const boost::json::array corpus = LoadCorpus();
  std::set<std::string> names;
  for (const auto& c : corpus) names.insert(std::string(c.at("name").as_string()));
  EXPECT_GE(corpus.size(), 40u);
  EXPECT_EQ(names.size(), corpus.size());
}

TEST(BadRequestCorpus, EveryCaseIsRefusedWithItsStatusAndParam) {
  for (const auto& c : LoadCorpus()) {
    const auto& obj = c.as_object();
    const std::string name(obj.at("name").as_string());
    SCOPED_TRACE(name);
    auto result = Parse(obj.at("path").as_string(), obj.at("body").as_string());
    ASSERT_FALSE(result.has_value());
    EXPECT_EQ(result.error().status, obj.at("status").as_int64());
    const auto& param = obj.at("param");
    EXPECT_EQ(result.error().param, param.is_null() ? "" : std::string(param.as_string()));
    EXPECT_FALSE(result.error().message.empty());
  }
}

}  // namespace
}  // namespace kvroute::api

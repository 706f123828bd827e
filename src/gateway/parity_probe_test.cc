// ParityProbe against fake workers: the HTTP call is a function that answers as an engine
// would (its /tokenize, and a completion whose KV event it applies to the index itself).
#include "gateway/parity_probe.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "tokenize/simple_tokenizer.h"

namespace kvroute::gateway {
namespace {

constexpr std::uint32_t kBlock = 16;

class ParityProbeTest : public ::testing::Test {
 protected:
  // How the fake engine behaves.
  bool has_tokenize = true;
  int token_shift = 0;        // added to every id its /tokenize returns
  bool publishes = true;      // a completion's blocks reach the index as an event
  bool stores_other = false;  // ... but under other tokens (a keying mismatch)
  std::uint64_t batches = 0;  // events "received" from the worker

  ParityProbeDeps Deps() {
    ParityProbeDeps d;
    d.tokenizer = &tokenizer_;
    d.block_size = kBlock;
    d.index = &index_;
    d.event_batches = [this](WorkerId) { return batches; };
    d.sleep = [](std::chrono::milliseconds) {};
    d.timeout = std::chrono::milliseconds(100);
    d.nonce = 7;
    d.http = [this](const std::string& url,
                    const std::string& body) -> std::expected<HttpReply, std::string> {
      auto o = boost::json::parse(body).as_object();
      if (url.ends_with("/tokenize")) {
        if (!has_tokenize) return HttpReply{.status = 404, .body = "{}"};
        std::vector<TokenId> ids;
        if (o.contains("messages")) {
          tokenize::ChatRequest chat;
          for (const auto& m : o.at("messages").as_array()) {
            chat.messages.push_back({.role = std::string(m.at("role").as_string()),
                                     .content = std::string(m.at("content").as_string())});
          }
          ids = *tokenizer_.EncodeChat(chat);
        } else {
          ids = tokenizer_.Encode(o.at("prompt").as_string(), true);
        }
        boost::json::array tokens;
        for (TokenId t : ids) tokens.push_back(t + token_shift);
        return HttpReply{.status = 200,
                         .body = boost::json::serialize(boost::json::object{{"tokens", tokens}})};
      }
      EXPECT_TRUE(url.ends_with("/v1/completions")) << url;
      std::vector<TokenId> prompt;
      for (const auto& t : o.at("prompt").as_array()) {
        prompt.push_back(static_cast<TokenId>(t.as_int64()));
      }
      if (publishes) {
        if (stores_other) prompt.insert(prompt.begin(), 1);  // e.g. a BOS kvroute did not add
        kv::BlockStored e;
        e.block_size = kBlock;
        for (std::size_t b = 0; b < prompt.size() / kBlock; ++b) {
          e.block_hashes.push_back(1000 + b);
          e.token_ids.insert(e.token_ids.end(), prompt.begin() + b * kBlock,
                             prompt.begin() + (b + 1) * kBlock);
        }
        index_.ApplyEvent(worker_.id, kv::KvEvent{e});
        ++batches;
      }
      return HttpReply{.status = 200, .body = "{}"};
    };
    return d;
  }

  std::vector<std::string> Settings(const std::vector<ProbeFinding>& findings) {
    std::vector<std::string> out;
    for (const auto& f : findings) {
      EXPECT_NE(f.message.find("worker w1"), std::string::npos) << f.message;
      out.push_back(f.setting);
    }
    return out;
  }

  tokenize::SimpleTokenizer tokenizer_;
  kv::KvIndex index_{kv::BlockKeyer(kBlock)};
  ParityTarget worker_{.id = 3,
                       .name = "w1",
                       .base_url = "http://w1",
                       .model = "m",
                       .block_size = kBlock,
                       .kv_events = true};
};

TEST_F(ParityProbeTest, AWorkerThatKeysAsKvrouteDoesHasNoFinding) {
  EXPECT_TRUE(ProbeWorker(worker_, Deps()).empty());
}

TEST_F(ParityProbeTest, ABlockSizeMismatchNamesTheWorkerAndSkipsTheHashProbe) {
  worker_.block_size = 32;
  publishes = false;
  EXPECT_EQ(Settings(ProbeWorker(worker_, Deps())), std::vector<std::string>{"block_size"});
}

TEST_F(ParityProbeTest, ATokenizerMismatchIsFoundInTextAndChat) {
  token_shift = 1;
  EXPECT_EQ(Settings(ProbeWorker(worker_, Deps())),
            (std::vector<std::string>{"tokenizer", "chat_template"}));
}

TEST_F(ParityProbeTest, NoTokenizeEndpointSkipsThoseChecks) {
  has_tokenize = false;
  EXPECT_TRUE(ProbeWorker(worker_, Deps()).empty());
}

TEST_F(ParityProbeTest, EventsThatNameOtherBlocksAreAHashMismatch) {
  stores_other = true;
  EXPECT_EQ(Settings(ProbeWorker(worker_, Deps())), std::vector<std::string>{"hash"});
}

TEST_F(ParityProbeTest, NoEventAtAllIsAKvEventsMismatch) {
  publishes = false;
  EXPECT_EQ(Settings(ProbeWorker(worker_, Deps())), std::vector<std::string>{"kv_events"});
}

TEST_F(ParityProbeTest, AWorkerWithoutEventsOrAnIndexGetsNoHashProbe) {
  publishes = false;
  worker_.kv_events = false;
  EXPECT_TRUE(ProbeWorker(worker_, Deps()).empty());
  worker_.kv_events = true;
  ParityProbeDeps d = Deps();
  d.index = nullptr;
  EXPECT_TRUE(ProbeWorker(worker_, d).empty());
}

}  // namespace
}  // namespace kvroute::gateway

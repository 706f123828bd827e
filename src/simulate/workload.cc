#include "simulate/workload.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "workload/trace_expand.h"

namespace kvroute::simulate {
namespace {

std::uint64_t Mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Streams of SeededTokens, kept apart per use.
constexpr std::uint64_t kCommonStream = 1;
constexpr std::uint64_t kSessionStream = 2ULL << 40;
constexpr std::uint64_t kTurnStream = 3ULL << 40;
constexpr std::uint64_t kSystemStream = 4ULL << 40;
constexpr std::uint64_t kQuestionStream = 5ULL << 40;

class AgenticWorkload final : public Workload {
 public:
  explicit AgenticWorkload(const AgenticSimOptions& o)
      : o_(o),
        total_sessions_(std::max(o.shape.sessions, o.concurrency)),
        clients_(std::min(o.concurrency, total_sessions_)),
        common_(SeededTokens(o.shape.seed, kCommonStream, o.shape.common_prefix_tokens)) {
    if (o_.procedure.warmup_step) second_turns_.resize(static_cast<std::size_t>(total_sessions_));
  }

  std::string name() const override { return "agentic"; }
  bool wants_output() const override { return true; }
  bool stopped() const override { return stopped_; }

  std::optional<Arrival> Next() override {
    if (started_ >= clients_) return std::nullopt;
    return FirstTurn(started_++, Nanos(0));
  }

  std::vector<Arrival> OnDone(const SimRequest& done, std::span<const TokenId> output, bool ok,
                              Nanos now) override {
    if (stopped_) return {};
    const Nanos at = now + Pause(done.session, done.turn);
    if (done.warmup) return OnWarmupDone(done, output, ok, now, at);
    if (done.turn + 1 < o_.shape.turns) return {FollowUp(done, output, ok, at)};
    // The session is over: this client takes the next one, or has none left.
    if (o_.procedure.warmup_step) {
      if (measured_started_ < total_sessions_) return {SecondTurn(measured_started_++, at)};
    } else if (started_ < total_sessions_) {
      return {FirstTurn(started_++, at)};
    }
    if (o_.procedure.early_stop) stopped_ = true;
    return {};
  }

 private:
  // Warm-up: each client sends one session's first turn at a time; when the last one is done,
  // every client starts the measured pass on its session's second turn, after its own pause.
  std::vector<Arrival> OnWarmupDone(const SimRequest& done, std::span<const TokenId> output,
                                    bool ok, Nanos now, Nanos at) {
    second_turns_[static_cast<std::size_t>(done.session)] = done.turn + 1 < o_.shape.turns
        ? std::optional(FollowUp(done, output, ok, Nanos(0)))
        : std::nullopt;
    ++warmup_done_;
    if (started_ < total_sessions_) return {FirstTurn(started_++, at)};
    if (warmup_done_ < total_sessions_) return {};
    std::vector<Arrival> out;
    while (measured_started_ < total_sessions_ && static_cast<int>(out.size()) < clients_) {
      const int s = measured_started_++;
      if (!second_turns_[static_cast<std::size_t>(s)]) continue;  // one-turn sessions
      out.push_back(SecondTurn(s, now + Pause(s, 0)));
    }
    return out;
  }

  // The client's pause after turn `turn` of `session` (the live client's own function).
  Nanos Pause(int session, int turn) const {
    return workload::AgenticTurnPause({o_.think_time, o_.turn_jitter}, o_.shape.seed, session, turn);
  }

  Arrival SecondTurn(int session, Nanos at) {
    Arrival a = std::move(*second_turns_[static_cast<std::size_t>(session)]);
    second_turns_[static_cast<std::size_t>(session)].reset();
    a.at = at;
    return a;
  }

  Arrival FollowUp(const SimRequest& done, std::span<const TokenId> output, bool ok,
                   Nanos at) const {
    Arrival next;
    next.at = at;
    next.request.session = done.session;
    next.request.turn = done.turn + 1;
    next.request.max_tokens = o_.shape.output_tokens;
    auto& p = next.request.prompt;
    p.reserve(done.prompt.size() + output.size() + o_.shape.turn_input_tokens);
    p = done.prompt;
    if (ok) p.insert(p.end(), output.begin(), output.end());
    AppendTurn(done.session, next.request.turn, &p);
    return next;
  }

  void AppendTurn(int session, int turn, std::vector<TokenId>* p) const {
    auto t = SeededTokens(o_.shape.seed,
                          kTurnStream + (static_cast<std::uint64_t>(session) << 16) +
                              static_cast<std::uint64_t>(turn),
                          o_.shape.turn_input_tokens);
    p->insert(p->end(), t.begin(), t.end());
  }

  Arrival FirstTurn(int session, Nanos at) const {
    Arrival a;
    a.at = at;
    a.request.session = session;
    a.request.turn = 0;
    a.request.max_tokens = o_.shape.output_tokens;
    a.request.warmup = o_.procedure.warmup_step;
    auto& p = a.request.prompt;
    p = common_;
    auto s = SeededTokens(o_.shape.seed, kSessionStream + static_cast<std::uint64_t>(session),
                          o_.shape.session_prefix_tokens);
    p.insert(p.end(), s.begin(), s.end());
    AppendTurn(session, 0, &p);
    return a;
  }

  AgenticSimOptions o_;
  int total_sessions_;
  int clients_;  // sessions at a time
  int started_ = 0;  // sessions whose first turn was sent
  // Warm-up step: each session's second turn (its prompt built from the warm-up answer),
  // until the measured pass sends it; sessions whose measured pass started.
  std::vector<std::optional<Arrival>> second_turns_;
  int warmup_done_ = 0;
  int measured_started_ = 0;
  bool stopped_ = false;
  std::vector<TokenId> common_;
};

class SharedPrefixWorkload final : public Workload {
 public:
  // Order and arrival times are kvroute bench's own (workload::MakeSharedPrefixPrompts shuffles
  // with std::mt19937_64(seed); workload::PoissonArrivals draws the gaps), so a simulated level
  // sends the same groups at the same model times as a live run with that seed: live and
  // simulated throughput then compare at the same offered load, not at two Poisson samples.
  explicit SharedPrefixWorkload(const SharedPrefixSimOptions& o)
      : o_(o), arrival_rng_(o.shape.seed), gap_(o.rate_per_s) {
    const int n = o.shape.groups * o.shape.prompts_per_group;
    order_.resize(static_cast<std::size_t>(std::max(n, 0)));
    std::iota(order_.begin(), order_.end(), 0);
    std::mt19937_64 order_rng(o.shape.seed);
    std::shuffle(order_.begin(), order_.end(), order_rng);
    total_ = o.requests > 0 ? o.requests : n;
  }

  std::string name() const override { return "shared-prefix"; }
  bool wants_output() const override { return false; }

  std::optional<Arrival> Next() override {
    if (sent_ >= total_ || order_.empty()) return std::nullopt;
    // As workload::PoissonArrivals: the first request at 0, then exponential gaps.
    if (sent_ > 0) clock_s_ += gap_(arrival_rng_);
    const int prompt = order_[static_cast<std::size_t>(sent_) % order_.size()];
    const int group = prompt / o_.shape.prompts_per_group;
    Arrival a;
    a.at = FromSeconds(clock_s_);
    a.request.session = group;
    a.request.turn = sent_;
    a.request.max_tokens = o_.shape.output_tokens;
    auto& p = a.request.prompt;
    p = SeededTokens(o_.shape.seed, kSystemStream + static_cast<std::uint64_t>(group),
                     o_.shape.system_prompt_tokens);
    auto q = SeededTokens(o_.shape.seed, kQuestionStream + static_cast<std::uint64_t>(prompt),
                          o_.shape.question_tokens);
    p.insert(p.end(), q.begin(), q.end());
    ++sent_;
    return a;
  }

  std::vector<Arrival> OnDone(const SimRequest&, std::span<const TokenId>, bool, Nanos) override {
    return {};
  }

 private:
  SharedPrefixSimOptions o_;
  std::mt19937_64 arrival_rng_;
  std::exponential_distribution<double> gap_;
  std::vector<int> order_;
  int total_ = 0;
  int sent_ = 0;
  double clock_s_ = 0;
};

class TraceWorkload final : public Workload {
 public:
  TraceWorkload(std::shared_ptr<const workload::Trace> trace, const TraceSimOptions& o)
      : trace_(std::move(trace)), o_(o) {
    for (const auto& r : trace_->requests) {
      for (std::uint64_t id : r.hash_ids) id_span_ = std::max(id_span_, id + 1);
    }
    palette_.resize(kVocabulary);
    std::iota(palette_.begin(), palette_.end(), kFirstToken);
  }

  std::string name() const override { return "trace"; }
  bool wants_output() const override { return false; }

  std::optional<Arrival> Next() override {
    if (index_ >= trace_->requests.size()) return std::nullopt;
    const workload::TraceRequest& src = trace_->requests[index_];
    workload::TraceRequest r = src;
    // Replica k of the trace: the same arrivals and shapes, its own prefixes.
    for (auto& id : r.hash_ids) id += id_span_ * static_cast<std::uint64_t>(replica_);
    const std::uint64_t serial =
        index_ * static_cast<std::uint64_t>(o_.replicas) + static_cast<std::uint64_t>(replica_);
    workload::ExpandOptions eo;
    eo.prefix_multiplier = o_.prefix_multiplier;
    eo.unique_salt = Mix(o_.seed) ^ serial;
    Arrival a;
    a.at = FromSeconds(src.arrival_s / o_.speedup);
    a.request.turn = static_cast<int>(serial);
    a.request.max_tokens = std::max<std::uint32_t>(1, src.output_tokens);
    const std::uint32_t block = trace_->hash_block_tokens > 0 ? trace_->hash_block_tokens : 512;
    a.request.prompt = workload::ExpandPrompt(r, block, palette_, eo);
    if (a.request.prompt.empty()) a.request.prompt.push_back(kFirstToken);
    if (++replica_ >= o_.replicas) {
      replica_ = 0;
      ++index_;
    }
    return a;
  }

  std::vector<Arrival> OnDone(const SimRequest&, std::span<const TokenId>, bool, Nanos) override {
    return {};
  }

 private:
  std::shared_ptr<const workload::Trace> trace_;
  TraceSimOptions o_;
  std::uint64_t id_span_ = 0;
  std::vector<TokenId> palette_;
  std::size_t index_ = 0;
  int replica_ = 0;
};

}  // namespace

std::vector<TokenId> SeededTokens(std::uint64_t seed, std::uint64_t stream, std::uint32_t count) {
  std::vector<TokenId> out(count);
  const std::uint64_t base = Mix(seed ^ Mix(stream));
  for (std::uint32_t i = 0; i < count; ++i) {
    out[i] = kFirstToken + static_cast<TokenId>(Mix(base + i) % kVocabulary);
  }
  return out;
}

workload::AgenticOptions DefaultAgenticShape() {
  workload::AgenticOptions shape;
  // Three sessions per slot at the default --concurrency 8, as the matrix runs them.
  shape.sessions = 24;
  shape.common_prefix_tokens = 4000;
  shape.session_prefix_tokens = 2000;
  shape.turns = 10;
  shape.turn_input_tokens = 1500;
  shape.output_tokens = 200;
  return shape;
}

std::uint64_t LongestAgenticRequestTokens(const workload::AgenticOptions& shape) {
  const std::uint64_t turns = static_cast<std::uint64_t>(std::max(shape.turns, 1));
  return std::uint64_t{shape.common_prefix_tokens} + shape.session_prefix_tokens +
         turns * (std::uint64_t{shape.turn_input_tokens} + shape.output_tokens);
}

std::unique_ptr<Workload> NewAgenticWorkload(const AgenticSimOptions& options) {
  return std::make_unique<AgenticWorkload>(options);
}

std::unique_ptr<Workload> NewSharedPrefixWorkload(const SharedPrefixSimOptions& options) {
  return std::make_unique<SharedPrefixWorkload>(options);
}

std::unique_ptr<Workload> NewTraceWorkload(std::shared_ptr<const workload::Trace> trace,
                                           const TraceSimOptions& options) {
  return std::make_unique<TraceWorkload>(std::move(trace), options);
}

}  // namespace kvroute::simulate

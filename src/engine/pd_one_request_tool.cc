// kvroute_pd_one_request: TTFT and ITL of one request served aggregated (one engine) and
// disaggregated (prefill engine → KV transfer → decode engine), simulated by the engine
// library in virtual time, next to the closed-form prediction of the profiles' formulas:
//
//   aggregated     TTFT = Σ PrefillTime(chunk, context)          ITL = DecodeStepTime(1, ctx)
//   disaggregated  TTFT = Σ PrefillTime on P + KvTransferTime(bytes, lanes, link)
//                         + PrefillTime(1, prompt − 1) on D      ITL = DecodeStepTime on D
//
// with chunks of each engine's max_num_batched_tokens and ctx = prompt + output / 2. The
// proxy hop between the legs costs nothing here. Used by docs/bench/pd-disaggregation.md.
//
// Usage: kvroute_pd_one_request AGG[:BUDGET] PREFILL[:BUDGET] DECODE[:BUDGET] OUTPUT PROMPT...
//   profiles by name, budget = max_num_batched_tokens (default 8192); the decode profile's
//   first link carries the KV.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.h"
#include "engine/kv_transfer.h"
#include "engine/step_time.h"

namespace kvroute::engine {
namespace {

struct Setup {
  Profile profile;
  std::uint32_t budget = 8192;
};

Setup Load(const char* arg) {
  Setup s;
  const std::string_view text(arg);
  const std::size_t colon = text.find(':');
  auto p = LoadProfile(text.substr(0, colon));
  if (!p) {
    std::fprintf(stderr, "%s\n", p.error().c_str());
    std::exit(2);
  }
  s.profile = *p;
  if (colon != std::string_view::npos) {
    s.budget = static_cast<std::uint32_t>(std::strtoul(arg + colon + 1, nullptr, 10));
  }
  return s;
}

EngineConfig ConfigOf(const Setup& s) {
  EngineConfig c;
  c.max_num_batched_tokens = s.budget;
  c.max_model_len = 1 << 20;
  return c;
}

RequestSpec Request(std::uint32_t prompt, std::uint32_t output) {
  RequestSpec r{.id = "request", .max_tokens = output, .ignore_eos = true};
  for (std::uint32_t i = 0; i < prompt; ++i) r.prompt.push_back(1 + i % 30000);
  return r;
}

struct Timing {
  double ttft = 0;
  double itl = 0;
  double transfer = 0;
};

// Steps `engine` from `now` until the request ends; TTFT from time 0.
Timing Run(Engine& engine, Nanos now) {
  Timing t;
  Nanos first{0};
  Nanos last{0};
  std::uint32_t tokens = 0;
  for (int guard = 0; guard < 1000000; ++guard) {
    StepResult r = engine.Step(now);
    for (const KvTransferDone& d : r.kv_transfers_done) t.transfer = ToSeconds(d.finished - d.started);
    if (r.duration == Nanos(0) && r.tokens.empty()) {
      // Nothing ran: the decode leg waits for its KV. Jump to its arrival.
      const auto next = engine.NextTimedEvent();
      if (engine.HasWork() || !next) break;
      now = *next;
      continue;
    }
    now += r.duration;
    bool done = false;
    for (const TokenEvent& e : r.tokens) {
      if (e.is_first) first = now;
      last = now;
      ++tokens;
      done = done || e.finished.has_value();
    }
    if (done) break;
  }
  t.ttft = ToSeconds(first);
  t.itl = tokens > 1 ? ToSeconds(last - first) / (tokens - 1) : 0;
  return t;
}

double ChunkedPrefill(const StepTimeModel& m, std::uint32_t prompt, std::uint32_t budget) {
  double s = 0;
  for (std::uint32_t done = 0; done < prompt; done += budget) {
    s += ToSeconds(m.PrefillTime(std::min(budget, prompt - done), done));
  }
  return s;
}

// --interference AGG[:BUDGET] DECODE[:BUDGET] REPLICAS CONTEXT BATCH...: the step time a
// decoding request sees with BATCH requests of CONTEXT tokens on the aggregated engine, alone
// and with one full prefill chunk (BUDGET tokens, on a CONTEXT-token cached prefix) in the
// same step, against the decode engine holding BATCH / REPLICAS of them (decode only).
int Interference(int argc, char** argv) {
  if (argc < 7) return 2;
  const Setup agg = Load(argv[2]), dec = Load(argv[3]);
  const auto replicas = static_cast<std::uint32_t>(std::stoul(argv[4]));
  const auto context = static_cast<std::uint64_t>(std::stoull(argv[5]));
  const StepTimeModel ma(agg.profile), md(dec.profile);
  std::printf("| sessions | agg decode-only step (ms) | agg step with a %u-token prefill chunk (ms) | "
              "P/D decode step (ms, batch per replica) |\n|---:|---:|---:|---:|\n",
              agg.budget);
  for (int i = 6; i < argc; ++i) {
    const auto batch = static_cast<std::uint32_t>(std::stoul(argv[i]));
    std::vector<SeqWork> mixed(batch, SeqWork{.new_tokens = 1, .context_tokens = context});
    mixed.push_back({.new_tokens = agg.budget - std::min(agg.budget - 1, batch),
                     .context_tokens = context});
    const std::uint32_t per = std::max<std::uint32_t>(1, batch / replicas);
    std::printf("| %u | %.1f | %.1f | %.1f (%u) |\n", batch,
                ToSeconds(ma.DecodeStepTime(batch, batch * context)) * 1e3,
                ToSeconds(ma.StepTime(mixed)) * 1e3,
                ToSeconds(md.DecodeStepTime(per, per * context)) * 1e3, per);
  }
  return 0;
}

int Main(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[1]) == "--interference") return Interference(argc, argv);
  if (argc < 6) {
    std::fprintf(stderr,
                 "usage: %s AGG[:BUDGET] PREFILL[:BUDGET] DECODE[:BUDGET] OUTPUT PROMPT...\n",
                 argv[0]);
    return 2;
  }
  const Setup agg = Load(argv[1]), pre = Load(argv[2]), dec = Load(argv[3]);
  const auto output = static_cast<std::uint32_t>(std::stoul(argv[4]));
  const LinkSpec* link = dec.profile.FindLink("");
  if (link == nullptr) {
    std::fprintf(stderr, "decode profile has no link\n");
    return 2;
  }
  const StepTimeModel ma(agg.profile), mp(pre.profile), md(dec.profile);
  const std::uint32_t tp_p = pre.profile.hardware.num_gpus, tp_d = dec.profile.hardware.num_gpus;
  std::printf("| prompt | agg TTFT sim / formula (ms) | agg ITL sim / formula (ms) | "
              "P/D TTFT sim / formula (ms) | of which transfer (ms) | P/D ITL sim / formula (ms) |\n"
              "|---:|---:|---:|---:|---:|---:|\n");
  for (int i = 5; i < argc; ++i) {
    const auto prompt = static_cast<std::uint32_t>(std::stoul(argv[i]));
    auto a = NewEngine(agg.profile, ConfigOf(agg));
    a->Add(Request(prompt, output));
    const Timing ta = Run(*a, Nanos(0));

    auto p = NewEngine(pre.profile, ConfigOf(pre));
    RequestSpec leg1 = Request(prompt, 1);
    leg1.remote_decode = true;
    p->Add(std::move(leg1));
    const Timing tp = Run(*p, Nanos(0));
    auto d = NewEngine(dec.profile, ConfigOf(dec));
    RequestSpec leg2 = Request(prompt, output);
    leg2.remote_prefill = RequestSpec::RemotePrefill{.prefill_tp = tp_p};
    d->Add(std::move(leg2));
    const Timing td = Run(*d, FromSeconds(tp.ttft));  // the decode leg starts when P answers

    const double ctx_mid = prompt + output / 2.0;
    const double agg_ttft_f = ChunkedPrefill(ma, prompt, agg.budget);
    const double agg_itl_f = ToSeconds(ma.DecodeStepTime(1, static_cast<std::uint64_t>(ctx_mid)));
    const std::uint32_t bs = d->config().block_size;
    const double bytes = ((prompt + bs - 1) / bs) * static_cast<double>(bs) *
                         KvTransferBytesPerToken(dec.profile.model, tp_d);
    const double xfer_f = ToSeconds(KvTransferTime(bytes, KvTransferLanes(tp_p, tp_d), *link));
    const double pd_ttft_f = ChunkedPrefill(mp, prompt, pre.budget) + xfer_f +
                             ToSeconds(md.PrefillTime(1, prompt - 1));
    const double pd_itl_f = ToSeconds(md.DecodeStepTime(1, static_cast<std::uint64_t>(ctx_mid)));
    std::printf("| %u | %.1f / %.1f | %.2f / %.2f | %.1f / %.1f | %.2f (%.0f MB) | %.2f / %.2f |\n",
                prompt, ta.ttft * 1e3, agg_ttft_f * 1e3, ta.itl * 1e3, agg_itl_f * 1e3,
                td.ttft * 1e3, pd_ttft_f * 1e3, td.transfer * 1e3, bytes / 1e6, td.itl * 1e3,
                pd_itl_f * 1e3);
  }
  return 0;
}

}  // namespace
}  // namespace kvroute::engine

int main(int argc, char** argv) { return kvroute::engine::Main(argc, argv); }

// Prefill/decode orchestration in virtual time (issue 19): the placement by sched::DecidePd,
// the two legs vLLM's proxy sends (a prefill leg with do_remote_decode and max_tokens 1 whose
// blocks stay pinned; a decode leg with do_remote_prefill that pulls only the blocks its
// engine lacks), the pull's end releasing the pins and teaching the router the link's
// bandwidth, and the engines' timed events (remote KV arriving, pins expiring).
//
// What a split request costs the client: TTFT from its send to the decode leg's first token
// (prefill leg, then the pull, then the recomputed last token), ITL on the decode engine.
// The proxy's hop between the legs takes no time here (the router delay applies once).
#include <algorithm>
#include <charconv>

#include "engine/kv_transfer.h"
#include "fleet/booking.h"
#include "simulate/simulator_impl.h"

namespace kvroute::simulate {

std::expected<void, std::string> Simulator::Impl::RoutePd(std::uint64_t id, Arrival a,
                                                          const sched::RequestProfile& profile,
                                                          DecisionRecord dr, Nanos sent,
                                                          Nanos now) {
  const std::vector<sched::WorkerSnapshot>& rows = snapshots.workers();
  auto decision = sched::DecidePd(profile, rows, *options.pd);
  if (!decision) return std::unexpected("P/D decision: " + decision.error());
  PdRecord pr;
  pr.request = id;
  if (!decision->chosen) {
    result.decisions.push_back(dr);
    result.pd.push_back(pr);
    workload::RequestResult& rec = result.level.requests[id].result;
    rec.ok = false;
    rec.error_kind = "http_5xx";  // the gateway's 503
    Schedule(workload->OnDone(a.request, {}, false, now));
    return {};
  }
  const sched::PdOption& o = *decision->chosen;
  for (WorkerId w : {o.prefill, o.decode}) {
    if (w >= workers.size() || !workers[w].alive) {
      return std::unexpected("the P/D decision chose a dead worker");
    }
  }
  const std::uint32_t bs = keyer.block_size();
  const auto prompt_tokens = static_cast<std::uint64_t>(profile.prompt_tokens);
  const fleet::CachedPrefix on_prefill = fleet::CachedPrefixOn(profile, o.prefill);
  dr.worker = o.decode;
  dr.predicted_cached_tokens = std::min<std::uint64_t>(
      std::uint64_t{on_prefill.blocks[static_cast<int>(Tier::kGpu)]} * bs, prompt_tokens);
  dr.predicted_ttft_s = o.ttft_s;
  dr.inflight_at_route = rows[o.decode].inflight_requests;
  dr.pending_prefill_at_route = rows[o.prefill].pending_prefill_tokens;
  dr.split = o.split;
  dr.prefill_worker = o.prefill;
  dr.predicted_prefill_tokens = o.prefill_tokens;
  dr.predicted_itl_s = o.itl_s;
  result.decisions.push_back(dr);
  pr.split = o.split;
  pr.prefill = o.prefill;
  pr.decode = o.decode;
  pr.predicted_transfer_s = o.transfer_s;
  result.pd.push_back(pr);
  if ((inputs & sched::kCacheView) != 0 && options.predicted_overlay) {
    predicted.Record(o.prefill, keys, now);
    if (o.split) predicted.Record(o.decode, keys, now);  // its pulled blocks are announced
  }

  LiveRequest lr;
  lr.worker = o.prefill;
  lr.arrival = sent;
  lr.last_token = now;
  lr.split = o.split;
  lr.prefill_worker = o.prefill;
  lr.decode_worker = o.decode;
  lr.kv_blocks = static_cast<std::uint32_t>(
      (prompt_tokens + a.request.max_tokens + bs - 1) / bs);
  ++workers[o.prefill].routed;
  engine::RequestSpec spec;
  spec.max_tokens = a.request.max_tokens;
  spec.ignore_eos = true;
  spec.seed = id;
  if (!o.split) {
    // Aggregated: the gateway's booking rule, one leg.
    fleet::RoutedRequest agg = fleet::BookingFor(profile, fleet::CachedPrefixOn(profile, o.decode),
                                                 o.decode, nullptr, rows[o.decode].wait_correction);
    agg.predicted_ttft_s = o.prefill_ttft_s;  // the tracker calibrates against the first token
    agg.predicted_wait_s = o.prefill_wait_s;
    agg.wait_correction = rows[o.decode].wait_correction;
    router.Book(id, agg, now);
    spec.id = std::to_string(id);
  } else {
    // Two bookings: the prefill leg on P (its uncached tokens, the prompt's blocks, one token)
    // and the decode leg on D (no prefill: its first token waits for the pull, so it must not
    // teach D's prefill rate).
    fleet::RoutedRequest leg = fleet::BookingFor(profile, on_prefill, o.prefill, nullptr,
                                                 rows[o.prefill].wait_correction);
    leg.kv_blocks = (prompt_tokens + bs - 1) / bs;
    // P's own prediction, so P's wait correction learns how far its queue runs ahead of it.
    leg.predicted_ttft_s = o.prefill_ttft_s;
    leg.predicted_wait_s = o.prefill_wait_s;
    leg.wait_correction = rows[o.prefill].wait_correction;
    router.Book(id | kPrefillLegBit, leg, now);
    lr.prefill_leg_open = true;
    fleet::RoutedRequest dec{.worker = o.decode,
                             .prompt_tokens = prompt_tokens,
                             .uncached_tokens = 0,
                             .kv_blocks = lr.kv_blocks};
    dec.observe_prefill = false;
    router.Book(id, dec, now);
    spec.id = std::to_string(id) + "p";
    spec.max_tokens = 1;  // vLLM's proxy: max_tokens 1, not streamed
    spec.remote_decode = true;
  }
  spec.prompt = a.request.prompt;  // the decode leg sends it again
  lr.request = std::move(a.request);
  const WorkerId first = o.prefill;
  spec.arrived_at = now;
  if (auto err = workers[first].engine->Add(std::move(spec))) {
    if (result.rejected++ == 0) result.first_rejection = *err;
    live.Insert(id, std::move(lr));
    Finish(id, false, "http_4xx", now);
    return {};
  }
  live.Insert(id, std::move(lr));
  StartStep(first, now);
  return {};
}

void Simulator::Impl::OnPrefillLegToken(WorkerId p, std::uint64_t id, const engine::TokenEvent& t,
                                        Nanos now) {
  LiveRequest* found = live.Find(id);
  if (found == nullptr || !found->split || found->in_decode_leg || found->worker != p) return;
  LiveRequest& lr = *found;
  const std::string leg_id = std::to_string(id) + "p";
  if (t.is_first) router.OnFirstToken(id | kPrefillLegBit, now);
  if (!t.finished) return;  // max_tokens 1: the first token is the last
  const bool ok = *t.finished == engine::FinishReason::kLength;
  router.OnDone(id | kPrefillLegBit, now, ok);
  lr.prefill_leg_open = false;
  if (!ok) {
    Finish(id, false, "stream", now);
    return;
  }
  lr.prefill_cached_tokens = t.cached_tokens;
  const WorkerId d = lr.decode_worker;
  auto release = [&] {
    if (workers[p].alive) {
      workers[p].engine->ReleasePinned(leg_id);
      StartStep(p, now);
    }
  };
  if (!workers[d].alive) {  // the decode worker died meanwhile: the client sees a refusal
    release();
    Finish(id, false, "connect", now);
    return;
  }
  engine::RequestSpec spec;
  spec.id = std::to_string(id);
  spec.prompt = lr.request.prompt;
  spec.max_tokens = lr.request.max_tokens;
  spec.ignore_eos = true;
  spec.seed = id;
  spec.remote_prefill = engine::RequestSpec::RemotePrefill{
      .prefill_tp = workers[p].engine->profile().hardware.num_gpus};
  if (!workload->wants_output()) lr.request.prompt.clear();
  lr.in_decode_leg = true;
  lr.worker = d;
  ++workers[d].routed;
  spec.arrived_at = now;
  if (auto err = workers[d].engine->Add(std::move(spec))) {
    if (result.rejected++ == 0) result.first_rejection = *err;
    release();
    Finish(id, false, "http_4xx", now);
    return;
  }
  StartStep(d, now);
}

void Simulator::Impl::OnTimedResults(WorkerId w, const engine::StepResult& r, Nanos now) {
  result.pins_expired += r.pins_expired.size();
  for (const engine::KvTransferDone& done : r.kv_transfers_done) {
    std::uint64_t id = 0;
    std::from_chars(done.request_id.data(), done.request_id.data() + done.request_id.size(), id);
    LiveRequest* lr = live.Find(id);
    if (lr == nullptr || !lr->split) continue;
    const WorkerId p = lr->prefill_worker;
    const double seconds = ToSeconds(done.finished - done.started);
    if (id < result.pd.size()) {
      PdRecord& pr = result.pd[id];
      pr.transferred = true;
      pr.transfer_blocks = done.blocks;
      pr.transfer_bytes = done.bytes;
      pr.transfer_s = seconds;
    }
    // The pull's observed time teaches the decode worker's link (what serve learns from the
    // decode leg's timing); a pull of nothing says nothing about bandwidth.
    if (done.bytes > 0) {
      const std::uint32_t lanes = engine::KvTransferLanes(
          workers[p].spec.profile.hardware.num_gpus, workers[w].spec.profile.hardware.num_gpus);
      router.OnKvTransfer(w, done.bytes, lanes, seconds);
    }
    if (workers[p].alive) {  // the decoder has read the blocks: the prefill engine frees them
      workers[p].engine->ReleasePinned(std::to_string(id) + "p");
      if (p != w) StartStep(p, now);
    }
  }
}

void Simulator::Impl::ArmWake(WorkerId w, Nanos now) {
  WorkerState& ws = workers[w];
  if (!ws.alive || ws.stepping) return;
  const std::optional<Nanos> next = ws.engine->NextTimedEvent();
  if (!next) return;
  const Nanos at = std::max(*next, now + Nanos(1));
  if (ws.wake_at && *ws.wake_at <= at) return;  // an earlier wake is queued already
  ws.wake_at = at;
  queue.Push(at, EventKind::kWake, w, ws.epoch);
}

}  // namespace kvroute::simulate

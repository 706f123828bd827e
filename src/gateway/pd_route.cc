// RequestPipeline::RouteTwoLegs: the proxy's placement of a request while prefill/decode
// disaggregation is active — sched::DecidePd over the same snapshot and cache views Route
// reads, turned into the bookings `kvroute simulate` makes (simulate/simulator_pd.cc): the
// prefill leg on P (its uncached tokens, the prompt's blocks, P's own TTFT prediction) and the
// decode leg on D (no prefill: its first token waits for the pull, so it teaches D nothing
// about prefill), or one aggregated booking. The prefill leg's body is made here too, on the
// compute thread, so the lane only sends it.
#include <algorithm>
#include <boost/json.hpp>

#include "api/pd_rewrite.h"
#include "fleet/booking.h"
#include "fleet/router_state.h"
#include "gateway/request_pipeline.h"
#include "sched/tier_pricing.h"

namespace kvroute::gateway {

namespace {

std::string UrlOf(const fleet::RouterState& state, WorkerId worker) {
  std::string url;
  state.VisitSpec(worker, [&url](const fleet::WorkerSpec& spec) { url = spec.base_url; });
  return url;
}

const sched::WorkerSnapshot* Row(const std::vector<sched::WorkerSnapshot>& rows, WorkerId id) {
  for (const auto& w : rows) {
    if (w.id == id) return &w;
  }
  return nullptr;
}

std::uint64_t BlocksOf(std::uint64_t tokens, std::uint32_t block_size) {
  return block_size == 0 ? 0 : (tokens + block_size - 1) / block_size;
}

}  // namespace

bool RequestPipeline::PdActive() const {
  switch (options_.pd_mode) {
    case PipelineOptions::PdMode::kOff:
      return false;
    case PipelineOptions::PdMode::kOn:
      return true;
    case PipelineOptions::PdMode::kAuto:
      break;
  }
  return deps_.router_state->AnySpec(
      [](const fleet::WorkerSpec& spec) { return spec.role != sched::Role::kMixed; });
}

std::expected<RouteOutcome, api::ApiError> RequestPipeline::RouteTwoLegs(
    const PreparedRequest& request, std::span<const WorkerId> exclude, Nanos now,
    sched::PolicyState& state) const {
  if (!PdActive()) return Route(request, exclude, now, state);
  std::vector<sched::WorkerSnapshot> workers = deps_.router_state->Snapshot(now, request.model);
  std::erase_if(workers, [&](const sched::WorkerSnapshot& w) {
    return std::find(exclude.begin(), exclude.end(), w.id) != exclude.end();
  });
  // fail_open answers by load alone, on one worker: never one that only prefills.
  auto fallback = [&](std::string reason) {
    std::erase_if(workers,
                  [](const sched::WorkerSnapshot& w) { return w.role == sched::Role::kPrefill; });
    return Fallback(request, std::move(workers), std::move(reason));
  };
  if (workers.empty()) {
    return std::unexpected(api::ApiError::Overloaded("no worker is available for this model"));
  }
  if (request.schedule_error) return fallback(*request.schedule_error);
  if (options_.inject_schedule_error) {
    return fallback("injected fault (debug.fault: schedule_error)");
  }
  sched::RequestProfile profile = ProfileOf(request);
  if (options_.itl_slo_s > 0) profile.itl_slo_s = options_.itl_slo_s;
  profile.cache_views = CacheViews(request.keys, now);
  sched::MergeSharedTier(workers, &profile.cache_views);
  auto decided = sched::DecidePd(profile, workers, options_.pd);
  if (!decided) return fallback("P/D decision: " + decided.error());
  if (!decided->chosen) {
    return std::unexpected(
        api::ApiError::Overloaded("no worker can take this request now: " + decided->why_none));
  }
  const sched::PdOption o = *decided->chosen;
  const sched::WorkerSnapshot* d = Row(workers, o.decode);
  const sched::WorkerSnapshot* p = Row(workers, o.prefill);
  if (d == nullptr || p == nullptr) {
    return fallback("P/D decision chose a worker outside the snapshot");
  }

  RouteOutcome out;
  out.pd_placed = true;
  out.worker = d->id;
  out.worker_name = d->name;
  out.base_url = UrlOf(*deps_.router_state, d->id);
  out.decision.policy = std::string("pd:") + sched::PdRuleName(options_.pd.rule);
  out.decision.chosen = d->id;
  out.decision.notes.push_back(decided->reason);
  out.pd = std::make_shared<const sched::PdDecision>(std::move(*decided));
  const fleet::CachedPrefix on_decode = fleet::CachedPrefixOn(profile, d->id);
  out.cached_blocks = on_decode.blocks;
  out.cached_any_blocks = on_decode.any_blocks;
  // D prefilling the request itself: the aggregated option's booking, with its prediction.
  fleet::RoutedRequest local = fleet::BookingFor(profile, on_decode, d->id, nullptr,
                                                 d->wait_correction);
  local.wait_correction = d->wait_correction;
  if (!o.split) {
    local.predicted_ttft_s = o.prefill_ttft_s;
    local.predicted_wait_s = o.prefill_wait_s;
    out.booking = local;
    return out;
  }

  const std::uint32_t bs = request.block_size;
  const std::uint64_t prompt = profile.prompt_tokens;
  PrefillLeg leg;
  leg.worker = p->id;
  leg.worker_name = p->name;
  leg.base_url = UrlOf(*deps_.router_state, p->id);
  const fleet::CachedPrefix on_prefill = fleet::CachedPrefixOn(profile, p->id);
  leg.cached_blocks = on_prefill.blocks[static_cast<int>(kv::Tier::kGpu)];
  leg.transfer_blocks = o.transfer_blocks;
  leg.predicted_transfer_s = o.transfer_s;
  leg.booking = fleet::BookingFor(profile, on_prefill, p->id, nullptr, p->wait_correction);
  leg.booking.kv_blocks = BlocksOf(prompt, bs);
  leg.booking.predicted_ttft_s = o.prefill_ttft_s;  // P's wait correction learns from it
  leg.booking.predicted_wait_s = o.prefill_wait_s;
  leg.booking.wait_correction = p->wait_correction;
  leg.local_booking = local;
  boost::system::error_code ec;
  boost::json::value parsed = boost::json::parse(*request.body, ec);
  if (ec || !parsed.is_object()) {
    // Prepare parsed these bytes already; this cannot fail unless they changed.
    return fallback("P/D: the forwarded body is not a JSON object");
  }
  leg.client_body = std::make_shared<const boost::json::object>(std::move(parsed.as_object()));
  leg.prefill_body =
      std::make_shared<const std::string>(boost::json::serialize(api::MakePrefillBody(*leg.client_body)));
  out.prefill = std::move(leg);
  // The decode leg: the whole prompt's KV and the output's, nothing to prefill.
  out.booking = fleet::RoutedRequest{.worker = d->id,
                                     .prompt_tokens = prompt,
                                     .uncached_tokens = 0,
                                     .kv_blocks = BlocksOf(prompt + profile.predicted_output_tokens, bs)};
  out.booking.observe_prefill = false;
  out.booking.wait_correction = d->wait_correction;
  return out;
}

}  // namespace kvroute::gateway

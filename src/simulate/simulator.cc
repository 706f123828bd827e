#include "simulate/simulator.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>

#include "fleet/booking.h"
#include "simulate/simulator_impl.h"

namespace kvroute::simulate {

std::expected<void, std::string> Simulator::Impl::AddWorker(const WorkerSpec& spec, Nanos now) {
  const auto w = static_cast<WorkerId>(workers.size());
  workers.emplace_back();
  workers.back().spec = spec;
  // The simulator keys blocks with kvroute's own BlockKey (no SHA-256 per block).
  workers.back().spec.config.event_hash = engine::EventHash::kBlockKey;
  workers.back().spec.config.seed = options.seed;
  workers.back().spec.config.shared.store = store;
  workers.back().spec.config.shared.leases = options.store_leases;
  StartWorker(w);
  // What the router is told about it: the engine's own capacity and CPU-tier bandwidth.
  const engine::EngineConfig& c = workers[w].engine->config();
  fleet::WorkerSpec fs;
  fs.name = "w" + std::to_string(w);
  fs.models = {options.model};
  fs.profile = spec.profile.name;
  fs.block_size = keyer.block_size();
  fs.kv_capacity_blocks = static_cast<std::uint64_t>(c.num_gpu_blocks_override);
  // P/D: the role, GPUs and the link the engine pulls remote KV over (its resolved kv_link).
  fs.role = spec.role;
  fs.gpus = spec.gpus;
  if (c.kv_link.bandwidth_bytes_per_s > 0) {
    fs.link = c.kv_link.name;
    fs.link_bytes_per_s = c.kv_link.bandwidth_bytes_per_s;
    fs.link_latency_s = c.kv_link.latency_s;
  }
  // Its tiers' load bandwidths, × the mis-seeding factor (SimOptions): the engine keeps its own.
  const double scale = options.router_tier_bandwidth_scale;
  if (c.num_cpu_blocks > 0) {
    fs.tier_load_bytes_per_s[static_cast<int>(Tier::kCpu)] =
        c.cpu_to_gpu_bandwidth_bytes_per_s * scale;
  }
  if (c.disk.num_blocks > 0) {
    fs.tier_load_bytes_per_s[static_cast<int>(Tier::kDisk)] = c.disk.read_bytes_per_s * scale;
  }
  if (store) {
    fs.tier_load_bytes_per_s[static_cast<int>(Tier::kShared)] = c.shared.read_bytes_per_s * scale;
  }
  auto id = router.Add(std::move(fs), spec.profile, now);
  if (!id) return std::unexpected("worker " + std::to_string(w) + ": " + id.error());
  if (*id != w) return std::unexpected("router state numbered worker " + std::to_string(w) +
                                       " as " + std::to_string(*id));
  return {};
}

void Simulator::Impl::DeliverKvEvents(WorkerId w, std::vector<kv::KvEvent> events,
                                      std::uint64_t epoch, Nanos now) {
  if (events.empty()) return;
  if (options.event_delay.count() == 0) {
    for (const kv::KvEvent& e : events) index.ApplyEvent(w, e);
    return;
  }
  const std::uint32_t slot = internal::TakeSlot(delivery_slots, free_delivery_slots);
  delivery_slots[slot] = KvDelivery{w, std::move(events)};
  queue.Push(now + options.event_delay, EventKind::kKvDelivery, slot, epoch);
}

void Simulator::Impl::StartWorker(WorkerId w) {
  WorkerState& ws = workers[w];
  ws.engine = engine::NewEngine(ws.spec.profile, ws.spec.config);
  ws.alive = true;
  ws.stepping = false;
  predicted.SetCapacity(w, static_cast<std::size_t>(ws.engine->config().num_gpu_blocks_override));
  router.health().SetDown(w, false);  // a restart; a new worker is not in the table yet
}

void Simulator::Impl::StartStep(WorkerId w, Nanos now, bool force) {
  WorkerState& ws = workers[w];
  if (!ws.alive || ws.stepping) return;
  if (!force && !ws.engine->HasWork()) {
    ArmWake(w, now);  // only remote KV or pins wait (P/D): wake at their time
    return;
  }
  if (options.full_trace) {
    ws.pending = ws.engine->Step(now);
  } else {
    ws.engine->StepInto(now, &ws.pending);  // reuses the result's vectors
  }
  ++result.steps;
  DrainStoreEvents(now);  // the step's puts (and the evictions they caused) happen now
  const auto& p = ws.pending;
  // Pulls that finished and pins that expired by the step's start are known now.
  if (!p.kv_transfers_done.empty() || !p.pins_expired.empty()) OnTimedResults(w, p, now);
  if (p.duration.count() == 0 && p.tokens.empty() && p.kv_events.empty() &&
      p.finished_without_token.empty()) {
    ArmWake(w, now);
    return;  // nothing could run (the engine waits for memory it will never get, or KV)
  }
  ws.stepping = true;
  queue.Push(now + p.duration, EventKind::kStepEnd, w, ws.epoch);
}

void Simulator::Impl::OnStepEnd(WorkerId w, Nanos now) {
  WorkerState& ws = workers[w];
  ws.stepping = false;
  // Read in place: StartStep below refills it (keeping its capacity).
  engine::StepResult& r = ws.pending;
  const bool keep_output = workload->wants_output();
  for (const engine::TokenEvent& t : r.tokens) {
    std::uint64_t id = 0;
    const char* end = t.request_id.data() + t.request_id.size();
    if (std::from_chars(t.request_id.data(), end, id).ptr != end) {
      OnPrefillLegToken(w, id, t, now);  // "<id>p": a split request's prefill leg
      continue;
    }
    LiveRequest* found = live.Find(id);
    if (found == nullptr) continue;
    LiveRequest& lr = *found;
    workload::RequestResult& rec = result.level.requests[id].result;
    if (t.is_first) {
      rec.ttft_s = ToSeconds(now - lr.arrival);
      // A decode leg reports the prefill leg's cached tokens (llm-d's usage merge).
      rec.cached_tokens = lr.split ? lr.prefill_cached_tokens : t.cached_tokens;
      if (!lr.split && lr.credited_shared_blocks > 0) {
        const std::uint32_t hit = t.cached_tokens / keyer.block_size();
        const std::uint32_t missing = lr.credited_blocks > hit ? lr.credited_blocks - hit : 0;
        result.shared_credited_blocks += lr.credited_shared_blocks;
        result.shared_missing_blocks += std::min(missing, lr.credited_shared_blocks);
      }
      if (lr.decision_row && !lr.split) {
        DecisionRecord& d = result.decisions[*lr.decision_row];
        d.engine_wait_s = ToSeconds(t.ttft_parts.first_commit - lr.arrival);
        d.tier_path_queue_s = t.ttft_parts.tier_path_queue_s;
        d.tier_transfer_s = t.ttft_parts.tier_transfer_s;
      }
      lr.first_token_seen = true;
      router.OnFirstToken(id, now);
    } else {
      rec.itl_s.push_back(ToSeconds(now - lr.last_token));
      router.OnToken(id, now);
    }
    lr.last_token = now;
    ++rec.output_tokens;
    if (keep_output) lr.output.push_back(t.token);
    if (t.finished) {
      const bool ok = *t.finished != engine::FinishReason::kAbort;
      Finish(id, ok, ok ? "" : "stream", now);
    }
  }
  for (const std::string& rid : r.finished_without_token) {
    std::uint64_t id = 0;
    std::from_chars(rid.data(), rid.data() + rid.size(), id);
    if (live.Find(id) != nullptr) Finish(id, false, "stream", now);
  }
  if (!r.kv_events.empty()) DeliverKvEvents(w, std::move(r.kv_events), ws.epoch, now);
  DrainStoreEvents(now);
  if (options.on_step_end) options.on_step_end(w, now);
  StartStep(w, now);
}

void Simulator::Impl::Finish(std::uint64_t id, bool ok, const char* error_kind, Nanos now) {
  if (live.Find(id) == nullptr) return;
  LiveRequest lr = live.Take(id);
  router.OnDone(id, now, ok);
  if (lr.prefill_leg_open) router.OnDone(id | kPrefillLegBit, now, false);
  workload::RequestResult& rec = result.level.requests[id].result;
  rec.ok = ok;
  rec.error_kind = ok ? "" : error_kind;
  rec.e2e_s = ToSeconds(now - lr.arrival);
  if (!ok) rec.itl_s.clear();
  last_done = std::max(last_done, now);
  Schedule(workload->OnDone(lr.request, lr.output, ok, now));
}

void Simulator::Impl::Schedule(std::optional<Arrival> a, bool from_next) {
  if (!a) return;
  if (options.max_requests > 0 && admitted >= options.max_requests) return;
  if (options.duration.count() > 0 && a->at > options.duration) return;
  ++admitted;
  const std::uint32_t slot = internal::TakeSlot(arrival_slots, free_arrival_slots);
  const Nanos at = a->at;
  arrival_slots[slot] = std::move(*a);
  ++pending_arrivals;
  queue.Push(at, EventKind::kArrival, slot, from_next ? kFromNext : 0);
}

void Simulator::Impl::PullNext() { Schedule(workload->Next(), true); }

std::expected<void, std::string> Simulator::Impl::OnArrival(std::uint32_t slot, bool from_next,
                                                            bool routed, Nanos now) {
  if (!routed) {
    if (workload->stopped()) {  // early stop: a client that would send now has stopped
      arrival_slots[slot] = {};
      free_arrival_slots.push_back(slot);
      --pending_arrivals;
      return {};
    }
    // The client's send: the level's clock starts (at its first measured request), the next
    // open-loop arrival is pulled, and the request reaches the engine after the router's
    // delay (same slot, pending still).
    if (first_arrival.count() < 0 && !arrival_slots[slot].request.warmup) first_arrival = now;
    const Nanos delay = RouterDelay(arrival_slots[slot].request);
    if (delay.count() > 0) {
      queue.Push(now + delay, EventKind::kArrival, slot, kRouted);
      if (from_next) PullNext();
      return {};
    }
  }
  Arrival a = std::move(arrival_slots[slot]);
  arrival_slots[slot] = {};
  free_arrival_slots.push_back(slot);
  --pending_arrivals;
  if (from_next && !routed) PullNext();
  const Nanos sent = routed ? a.at : now;

  const std::uint64_t id = result.level.requests.size();
  workload::RequestRecord record;
  record.session = a.request.session;
  record.turn = a.request.turn;
  record.warmup = a.request.warmup;
  record.result.start_s = ToSeconds(sent);
  record.result.prompt_tokens = static_cast<std::uint32_t>(a.request.prompt.size());
  // One allocation for every gap (growing by push_back dominated malloc time at scale).
  record.result.itl_s.reserve(a.request.max_tokens > 0 ? a.request.max_tokens - 1 : 0);
  result.level.requests.push_back(std::move(record));

  // The request profile, as the gateway builds it.
  const std::uint32_t bs = keyer.block_size();
  sched::RequestProfile profile;
  profile.model = options.model;
  profile.prompt_tokens = a.request.prompt.size();
  profile.block_size = bs;
  profile.num_full_blocks = static_cast<std::uint32_t>(a.request.prompt.size() / bs);
  profile.predicted_output_tokens = a.request.max_tokens;
  keys.clear();
  const bool use_cache = (inputs & sched::kCacheView) != 0;
  if (use_cache) {
    // The request path's keys. Simulated workloads carry no adapter, salt or image, so the
    // extra-keys rule (kv/keys/extra_keys.h) gives no block any, as in the engines' specs below.
    keyer.AppendKeys(a.request.prompt, keyer.Root(), &keys);
    // What the store stored or evicted since the last drain (steps started since the last
    // step end, leases taken at Add) is published now (SimOptions::shared_store).
    DrainStoreEvents(now);
    std::vector<kv::WorkerMatch> matches =
        options.predicted_overlay ? kv::LookupWithPredictions(index, predicted, keys, now)
                                  : index.Lookup(keys);
    // In worker order, as the snapshots are: Decide then matches them in one walk.
    std::ranges::sort(matches, {}, &kv::WorkerMatch::worker);
    profile.cache_views.reserve(matches.size());
    for (const kv::WorkerMatch& m : matches) {
      sched::CacheView v;
      v.worker = m.worker;
      v.depth_blocks = m.depth;
      v.any_depth_blocks = m.any_depth;
      v.stale = m.stale;
      profile.cache_views.push_back(v);
    }
  }
  router.Refresh(now, &snapshots);  // re-reads only the workers that changed
  if (options.pd) {
    DecisionRecord pd_record;
    pd_record.request = id;
    pd_record.at_s = ToSeconds(now);
    pd_record.prompt_tokens = profile.prompt_tokens;
    return RoutePd(id, std::move(a), profile, pd_record, sent, now);
  }
  const std::vector<sched::WorkerSnapshot>& rows = snapshots.workers();
  if (use_cache && store) sched::MergeSharedTier(rows, &profile.cache_views);
  auto decision = options.policy->Decide(
      profile, rows, policy_state,
      options.full_trace ? sched::TraceDetail::kFull : sched::TraceDetail::kChosenOnly);
  if (!decision)
    return std::unexpected("policy " + options.policy->name() + ": " + decision.error().message);
  DecisionRecord dr;
  dr.request = id;
  dr.at_s = ToSeconds(now);
  dr.prompt_tokens = profile.prompt_tokens;
  if (!decision->chosen) {
    // The gateway answers 503 when no worker can take the request.
    result.decisions.push_back(dr);
    workload::RequestResult& rec = result.level.requests[id].result;
    rec.ok = false;
    rec.error_kind = "http_5xx";
    Schedule(workload->OnDone(a.request, {}, false, now));
    return {};
  }
  const WorkerId w = *decision->chosen;
  if (w >= workers.size() || !workers[w].alive) {
    return std::unexpected("policy " + options.policy->name() + " chose a dead worker");
  }
  // The route's booking, by the gateway's rule (fleet/booking.h); the decision record keeps
  // the GPU depth (what the engine's prefix hit will be).
  const fleet::CachedPrefix cached = fleet::CachedPrefixOn(profile, w);
  const auto prompt_tokens = static_cast<std::uint64_t>(profile.prompt_tokens);
  dr.worker = w;
  dr.prefill_worker = w;
  dr.predicted_cached_tokens = std::min<std::uint64_t>(
      std::uint64_t{cached.blocks[static_cast<int>(Tier::kGpu)]} * bs, prompt_tokens);
  dr.inflight_at_route = rows[w].inflight_requests;
  dr.pending_prefill_at_route = rows[w].pending_prefill_tokens;
  dr.wait_correction_at_route = rows[w].wait_correction;
  if (const sched::CandidateTrace* c = decision->Find(w)) {
    dr.predicted_ttft_s = c->predicted_ttft_s;
    dr.predicted_wait_s = c->predicted_wait_s;
  }
  result.decisions.push_back(dr);
  if (use_cache && options.predicted_overlay) predicted.Record(w, keys, now);

  LiveRequest lr;
  lr.decision_row = result.decisions.size() - 1;
  lr.worker = w;
  lr.arrival = sent;  // TTFT and E2E count from the client's send, router delay included
  lr.last_token = now;
  if (store) {
    // What the store alone is credited with: the shared depth beyond every local tier, all
    // capped where the engine's hit stops (one token short of the prompt).
    const auto hittable = static_cast<std::uint32_t>((prompt_tokens - 1) / bs);
    std::uint32_t local = 0;
    for (int t = 0; t < static_cast<int>(Tier::kShared); ++t) {
      local = std::max(local, std::min(cached.blocks[t], hittable));
    }
    const std::uint32_t shared = std::min(cached.blocks[static_cast<int>(Tier::kShared)], hittable);
    lr.credited_blocks = std::max(local, std::min(cached.any_blocks, hittable));
    lr.credited_shared_blocks = shared > local ? shared - local : 0;
  }
  router.Book(id, fleet::BookingFor(profile, cached, w, &*decision, rows[w].wait_correction), now);
  ++workers[w].routed;
  engine::RequestSpec spec;
  spec.id = std::to_string(id);
  spec.max_tokens = a.request.max_tokens;
  spec.ignore_eos = true;
  spec.seed = id;
  if (workload->wants_output()) {
    spec.prompt = a.request.prompt;
  } else {
    spec.prompt = std::move(a.request.prompt);
    a.request.prompt.clear();
  }
  lr.request = std::move(a.request);
  spec.arrived_at = now;  // the store lease, if any, is taken now (engine.h)
  if (auto err = workers[w].engine->Add(std::move(spec))) {
    if (result.rejected++ == 0) result.first_rejection = *err;
    live.Insert(id, std::move(lr));
    Finish(id, false, "http_4xx", now);  // vLLM rejects what can never fit with a 400
    return {};
  }
  live.Insert(id, std::move(lr));
  StartStep(w, now);
  return {};
}

void Simulator::Impl::FailWorker(WorkerId w, Nanos now) {
  WorkerState& ws = workers[w];
  if (!ws.alive) return;
  // Its in-flight requests fail: mid-stream ones with a broken stream, queued ones with a
  // refused connection (the client sees the socket close either way).
  for (std::uint64_t id : live.OnWorker(w)) {
    const bool streaming = live.Find(id)->first_token_seen;
    Finish(id, false, streaming ? "stream" : "connect", now);
  }
  AddCounters(ws.engine->Stats(), &ws.past);
  ws.engine.reset();
  ws.alive = false;
  ws.stepping = false;
  ws.pending = {};
  ws.wake_at.reset();
  ++ws.epoch;
  router.ForgetBookings(w);
  router.health().SetDown(w, true);  // the gateway's health checker would eject it
  router.ClearMetrics(w);
  index.RemoveWorker(w);
  predicted.RemoveWorker(w);
}

void Simulator::Impl::RestartWorker(WorkerId w, Nanos now) {
  FailWorker(w, now);  // a restart of a live worker loses its work and cache too
  ++workers[w].restarts;
  StartWorker(w);
}

void Simulator::Impl::Scrape(Nanos now) {
  for (std::size_t w = 0; w < workers.size(); ++w) {
    if (!workers[w].alive) continue;
    const engine::EngineStats s = workers[w].engine->Stats();
    fleet::EngineMetrics m;
    m.scraped_at = now;
    m.num_waiting = s.num_waiting;
    m.num_running = s.num_running;
    m.kv_usage = s.kv_cache_usage;
    router.SetMetrics(static_cast<WorkerId>(w), m);
  }
}

void Simulator::Impl::Progress(Nanos now, bool final_line) {
  // On a terminal one line rewritten in place; into a file or pipe (CI, `2> log`) a whole
  // line every 5 s, since a carriage return there glues the lines together.
  static const bool terminal = isatty(fileno(stderr)) != 0;
  const auto t = std::chrono::steady_clock::now();
  const auto every = terminal ? std::chrono::milliseconds(250) : std::chrono::milliseconds(5000);
  if (!final_line && t - last_progress < every) return;
  last_progress = t;
  std::fprintf(stderr, "%ssimulate: virtual %.1f s, requests %zu routed, %zu in flight, wall %.1f s%s",
               terminal ? "\r" : "", ToSeconds(now), result.level.requests.size(), live.size(),
               std::chrono::duration<double>(t - wall_start).count(),
               final_line || !terminal ? "\n" : "");
  std::fflush(stderr);
}

std::expected<SimResult, std::string> Simulator::Impl::Run() {
  if (!options.policy) return std::unexpected("no policy");
  SortChanges(&options.fleet);
  if (auto ok = ValidateFleet(options.fleet); !ok) return std::unexpected(ok.error());
  inputs = options.policy->RequiredInputs();
  // The P/D decision reads the cost model's every input (DecidePd, not the policy).
  if (options.pd) inputs = sched::kCacheView | sched::kRouterLoad | sched::kScrapedMetrics | sched::kRates;
  wall_start = std::chrono::steady_clock::now();
  last_progress = wall_start;
  for (const WorkerSpec& spec : options.fleet.workers) {
    if (auto ok = AddWorker(spec, Nanos(0)); !ok) return std::unexpected(ok.error());
    result.gpus += static_cast<int>(spec.gpus > 0 ? spec.gpus : spec.profile.hardware.num_gpus);
  }
  for (std::size_t i = 0; i < options.fleet.changes.size(); ++i) {
    queue.Push(options.fleet.changes[i].at, EventKind::kFleetChange, static_cast<std::uint32_t>(i));
  }
  if (NeedsScrape()) {
    Scrape(Nanos(0));
    queue.Push(options.scrape_interval, EventKind::kScrape);
  }
  PullNext();
  Nanos now{0};
  while (!queue.empty()) {
    if (pending_arrivals == 0 && live.empty()) break;
    const Event e = queue.Pop();
    now = e.time;
    ++result.events;
    switch (e.kind) {
      case EventKind::kArrival:
        if (auto ok = OnArrival(e.a, (e.b & kFromNext) != 0, (e.b & kRouted) != 0, now); !ok) {
          if (options.progress) Progress(now, true);
          return std::unexpected(ok.error());
        }
        break;
      case EventKind::kStepEnd:
        if (workers[e.a].alive && workers[e.a].epoch == e.b) OnStepEnd(e.a, now);
        break;
      case EventKind::kKvDelivery: {
        KvDelivery d = std::move(delivery_slots[e.a]);
        delivery_slots[e.a] = {};
        free_delivery_slots.push_back(e.a);
        // The store has no epoch: its restart is its own AllBlocksCleared.
        if (d.worker == sched::kSharedStoreWorker ||
            (workers[d.worker].alive && workers[d.worker].epoch == e.b)) {
          for (const kv::KvEvent& ev : d.events) index.ApplyEvent(d.worker, ev);
        }
        break;
      }
      case EventKind::kWake: {
        WorkerState& ws = workers[e.a];
        if (ws.wake_at && *ws.wake_at == now) ws.wake_at.reset();
        if (ws.alive && ws.epoch == e.b) StartStep(e.a, now, /*force=*/true);
        break;
      }
      case EventKind::kScrape:
        Scrape(now);
        queue.Push(now + options.scrape_interval, EventKind::kScrape);
        break;
      case EventKind::kFleetChange: {
        const FleetChange& c = options.fleet.changes[e.a];
        if (c.kind == FleetChange::Kind::kFail) {
          FailWorker(c.worker, now);
        } else if (c.kind == FleetChange::Kind::kRestart) {
          RestartWorker(c.worker, now);
        } else {
          for (int k = 0; k < c.count; ++k) {
            if (auto ok = AddWorker(c.spec, now); !ok) return std::unexpected(ok.error());
          }
        }
        break;
      }
    }
    if (options.progress && (result.events & 1023) == 0) Progress(now, false);
  }
  if (options.progress) Progress(now, true);

  result.virtual_s = ToSeconds(now);
  result.wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  ReportCounters();
  return std::move(result);
}

Simulator::Simulator(SimOptions options, std::unique_ptr<Workload> workload)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(workload))) {}

Simulator::~Simulator() = default;

std::expected<SimResult, std::string> Simulator::Run() { return impl_->Run(); }

const engine::Engine* Simulator::engine(WorkerId worker) const {
  if (worker >= impl_->workers.size() || !impl_->workers[worker].alive) return nullptr;
  return impl_->workers[worker].engine.get();
}

const kv::KvIndex& Simulator::index() const { return impl_->index; }

const fleet::RouterState& Simulator::router_state() const { return impl_->router; }

}  // namespace kvroute::simulate

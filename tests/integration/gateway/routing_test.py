"""kvroute serve in front of 3 sims (speedup 20): conversations stay where their KV blocks
are, load spreads when many sessions arrive at once, and the small endpoints answer.

Usage: routing_test.py <kvroute binary>"""

import json
import sys
import threading

from cluster import Cases, Cluster, check, get, metric_sum, parse_prom, post, stream_events

binary = sys.argv[1]
cases = Cases()

def run_conversation(c):
    """Five chat turns, each extending the last; returns (workers, cached tokens per turn)."""
    messages = [{"role": "system", "content": "You are a helpful assistant. " * 20}]
    workers, cached = [], []
    for turn in range(5):
        messages.append({"role": "user", "content": "Question %d: %s" % (turn, "why? " * 30)})
        status, headers, body = post(c.port, "/v1/chat/completions", {
            "model": "sim-model", "messages": messages, "max_tokens": 12, "ignore_eos": True})
        check(status == 200, "turn %d: %d %s" % (turn, status, body))
        r = json.loads(body)
        workers.append(headers.get("x-kvroute-worker"))
        cached.append(r["usage"]["prompt_tokens_details"]["cached_tokens"])
        messages.append({"role": "assistant", "content": r["choices"][0]["message"]["content"]})
    return workers, cached


with Cluster(binary, n=3, speedup=20) as c:

    def conversation_stays_on_its_worker():
        workers, cached = run_conversation(c)
        check(len(set(workers)) == 1, "turns went to %s" % workers)
        check(all(b > a for a, b in zip(cached[1:], cached[2:])) and cached[-1] > cached[1],
              "cached tokens do not grow: %s" % cached)
        # The holder's own metrics agree: it served prefix-cache hits.
        hits = metric_sum(c.sim(workers[0]).metrics(), "vllm:prefix_cache_hits_total")
        check(hits >= cached[-1], "holder reports %s hit tokens, usage said %s" % (hits, cached))

    def load_spreads_over_every_worker():
        before = {s.name: metric_sum(s.metrics(), "vllm:request_success_total") for s in c.sims}
        errors = []

        def session(i):
            try:
                status, _, events, _ = stream_events(c.port, "/v1/completions", {
                    "model": "sim-model", "prompt": "session %d " % i + "tokens " * 200,
                    "max_tokens": 60, "ignore_eos": True, "stream": True})
                if status != 200 or events[-1] != "[DONE]":
                    errors.append((i, status))
            except Exception as e:  # noqa: BLE001
                errors.append((i, str(e)))

        threads = [threading.Thread(target=session, args=(i,)) for i in range(36)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        check(not errors, "failed sessions: %s" % errors[:5])
        after = {s.name: metric_sum(s.metrics(), "vllm:request_success_total") for s in c.sims}
        got = {n: after[n] - before[n] for n in after}
        check(sum(got.values()) == 36, "requests per worker %s" % got)
        check(all(v > 0 for v in got.values()), "a worker got no work: %s" % got)

    def models_are_aggregated_from_workers():
        status, _, body = get(c.port, "/v1/models")
        check(status == 200, body)
        ids = [m["id"] for m in json.loads(body)["data"]]
        check(ids == ["sim-model"], ids)

    def health_and_ready_answer():
        check(get(c.port, "/health")[0] == 200, "health")
        check(get(c.port, "/ready")[0] == 200, "ready")

    def debug_route_explains_without_sending():
        before = sum(metric_sum(s.metrics(), "vllm:request_success_total") for s in c.sims)
        status, _, body = post(c.port, "/debug/route", {
            "model": "sim-model", "prompt": "explain " * 100, "max_tokens": 5})
        check(status == 200, body)
        d = json.loads(body)
        check(d["chosen"] in [s.name for s in c.sims], d)
        check(len(d["candidates"]) == 3 and d["policy"] == "predicted_latency", d)
        after = sum(metric_sum(s.metrics(), "vllm:request_success_total") for s in c.sims)
        check(before == after, "debug/route sent a request")

    def metrics_list_requests_and_latencies():
        status, headers, body = get(c.port, "/metrics")
        check(status == 200 and headers["content-type"].startswith("text/plain"), headers)
        m = parse_prom(body)
        check(metric_sum(m, "kvroute_requests_total", status="200") >= 41, "requests_total")
        check(metric_sum(m, "kvroute_ttft_seconds_count") >= 36, "ttft histogram")
        check(metric_sum(m, "kvroute_itl_seconds_count") > 0, "itl histogram")
        check(metric_sum(m, "kvroute_predicted_cached_tokens_total", tier="gpu") > 0,
              "predicted cached tokens")
        check(metric_sum(m, "kvroute_index_blocks") > 0, "index is fed by KV events")
        check(metric_sum(m, "kvroute_worker_healthy") == 3, "worker health")
        check(metric_sum(m, "kvroute_decision_latency_seconds_count") >= 41, "decision latency")

    def request_id_is_passed_through():
        status, headers, _ = post(c.port, "/v1/completions",
                                  {"model": "sim-model", "prompt": "hi", "max_tokens": 2},
                                  headers={"X-Request-Id": "my-id-42"})
        check(status == 200 and headers.get("x-request-id") == "my-id-42", headers)

    cases.run("a conversation stays on the worker that holds it", conversation_stays_on_its_worker)
    cases.run("load spreads over every worker", load_spreads_over_every_worker)
    cases.run("/v1/models is aggregated from the workers", models_are_aggregated_from_workers)
    cases.run("/health and /ready answer 200", health_and_ready_answer)
    cases.run("/debug/route explains without sending", debug_route_explains_without_sending)
    cases.run("/metrics lists requests, latencies, index", metrics_list_requests_and_latencies)
    cases.run("X-Request-Id is passed through", request_id_is_passed_through)

with Cluster(binary, n=3, speedup=20,
             extra_yaml="mode: approximate\nscheduler: {policy: approx_prefix}\n") as c:

    def approximate_mode_keeps_conversations_too():
        workers, cached = run_conversation(c)
        check(len(set(workers)) == 1, "turns went to %s" % workers)
        check(cached[-1] > cached[1] > 0, "cached tokens do not grow: %s" % cached)

    cases.run("approximate mode (no events, no tokenizer) keeps a conversation on its worker",
              approximate_mode_keeps_conversations_too)

cases.exit()

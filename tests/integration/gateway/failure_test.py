"""Failure semantics of kvroute serve against live sims (docs/operations.md):
a worker killed mid-stream, admin drain, SIGTERM drain, fail_open / fail_close.

Usage: failure_test.py <kvroute binary>"""

import http.client
import json
import signal
import sys
import threading
import time

from cluster import Cases, Cluster, check, get, metric_sum, parse_prom, post, stream_events, wait_until

binary = sys.argv[1]
cases = Cases()


def open_stream(port, body):
    """Starts a streaming request; returns (connection, response) with headers read."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("POST", "/v1/completions", body=json.dumps(body),
                 headers={"Content-Type": "application/json"})
    return conn, conn.getresponse()


def long_stream_body(tag, tokens=400):
    return {"model": "sim-model", "prompt": "%s " % tag + "long " * 100, "max_tokens": tokens,
            "ignore_eos": True, "stream": True}


def read_events(resp):
    text = resp.read().decode(errors="replace")
    return [l[len("data: "):] for l in text.split("\n") if l.startswith("data: ")]


def killed_worker_mid_stream():
    # Without stream migration (limits.max_migrations 0; tests/integration/migration/ has the
    # default, where the stream goes on elsewhere).
    with Cluster(binary, n=3, speedup=5, extra_yaml="limits: {max_migrations: 0}\n") as c:
        conn, resp = open_stream(c.port, long_stream_body("kill"))
        check(resp.status == 200, resp.status)
        victim = resp.getheader("x-kvroute-worker")
        first = resp.read1(256)
        check(b"data: " in first, first)
        c.sim(victim).proc.kill()
        events = read_events(resp)
        conn.close()
        check(events and events[-1] == "[DONE]", "stream did not end with [DONE]: %s" % events[-3:])
        check(any(e.startswith('{"error"') for e in events[-2:]), "no error event: %s" % events[-3:])
        # No further routing to it: every later request lands elsewhere and succeeds.
        for i in range(12):
            status, headers, body = post(c.port, "/v1/completions", {
                "model": "sim-model", "prompt": "after %d" % i, "max_tokens": 3})
            check(status == 200, "after kill: %d %s" % (status, body))
            check(headers.get("x-kvroute-worker") != victim, "routed to the dead worker")


def admin_drain_loses_nothing():
    with Cluster(binary, n=2, speedup=10) as c:
        results = []
        started = threading.Barrier(5)

        def run(i):
            conn, resp = open_stream(c.port, long_stream_body("drain%d" % i, tokens=150))
            worker = resp.getheader("x-kvroute-worker")
            started.wait(timeout=30)
            results.append((worker, resp.status, read_events(resp)))
            conn.close()

        threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        started.wait(timeout=30)
        status, _, body = post(c.port, "/admin/drain", {"worker": "w0"})
        check(status == 200, body)
        # New requests avoid the draining worker while its streams finish.
        for i in range(6):
            status, headers, _ = post(c.port, "/v1/completions",
                                      {"model": "sim-model", "prompt": "new %d" % i, "max_tokens": 2})
            check(status == 200 and headers.get("x-kvroute-worker") == "w1", headers)
        for t in threads:
            t.join(timeout=120)
        check(len(results) == 4, results)
        for worker, status, events in results:
            check(status == 200 and events[-1] == "[DONE]", (worker, status, events[-2:]))
            check(not any(e.startswith('{"error"') for e in events), "error in a drained stream")
        status, _, body = get(c.port, "/admin/workers")
        w0 = [w for w in json.loads(body)["workers"] if w["name"] == "w0"][0]
        check(w0["draining"] and w0["inflight_requests"] == 0, w0)
        check(post(c.port, "/admin/undrain", {"worker": "w0"})[0] == 200, "undrain")


def sigterm_drain_loses_nothing():
    with Cluster(binary, n=2, speedup=10,
                 extra_yaml="shutdown_grace_s: 1.0\ndrain_timeout_s: 60\n") as c:
        results = []
        started = threading.Barrier(4)

        def run(i):
            conn, resp = open_stream(c.port, long_stream_body("term%d" % i, tokens=1500))
            started.wait(timeout=30)
            results.append((resp.status, read_events(resp)))
            conn.close()

        threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        started.wait(timeout=30)
        c.serve.signal(signal.SIGTERM)
        # Readiness goes false during the grace period.
        ready = wait_until(lambda: get(c.port, "/ready")[0] == 503, 0.9, 0.05)
        check(ready, "/ready stayed 200 after SIGTERM")
        # After the grace period the listener is closed: new connections are refused while the
        # in-flight streams keep going.
        time.sleep(1.3)
        try:
            get(c.port, "/health", timeout=5)
            refused = False
        except (ConnectionRefusedError, ConnectionResetError, http.client.RemoteDisconnected):
            refused = True
        check(refused, "a new connection was accepted after the grace period")
        check(len(results) < 3, "streams ended before the grace period: the case proves nothing")
        for t in threads:
            t.join(timeout=120)
        rc = c.serve.wait(60)
        check(rc == 0, "serve exit %s: %s" % (rc, c.serve.stderr()[-500:]))
        check(len(results) == 3, results)
        for status, events in results:
            check(status == 200 and events[-1] == "[DONE]", (status, events[-2:]))
            check(not any(e.startswith('{"error"') for e in events), "a stream was cut")


def fail_open_routes_by_load():
    with Cluster(binary, n=2, extra_yaml="failure_mode: fail_open\ndebug: {fault: schedule_error}\n") as c:
        for i in range(4):
            status, headers, body = post(c.port, "/v1/completions",
                                         {"model": "sim-model", "prompt": "x%d" % i, "max_tokens": 2})
            check(status == 200, body)
        m = parse_prom(get(c.port, "/metrics")[2])
        check(metric_sum(m, "kvroute_scheduling_failures_total", failure_mode="fail_open") == 4, m.get("kvroute_scheduling_failures_total"))
        status, _, body = post(c.port, "/debug/route", {"model": "sim-model", "prompt": "q"})
        d = json.loads(body)
        check(d["fell_back"] and "injected" in d["fallback_reason"], d)


def fail_close_answers_503():
    with Cluster(binary, n=2, extra_yaml="failure_mode: fail_close\ndebug: {fault: schedule_error}\n") as c:
        before = sum(metric_sum(s.metrics(), "vllm:request_success_total") for s in c.sims)
        status, _, body = post(c.port, "/v1/completions",
                               {"model": "sim-model", "prompt": "x", "max_tokens": 2})
        check(status == 503, "%d %s" % (status, body))
        check(json.loads(body)["error"]["message"], body)
        after = sum(metric_sum(s.metrics(), "vllm:request_success_total") for s in c.sims)
        check(before == after, "a worker served a fail_close request")


cases.run("without migration, a worker killed mid-stream ends the stream with an error event", killed_worker_mid_stream)
cases.run("admin drain loses no in-flight request", admin_drain_loses_nothing)
cases.run("SIGTERM drain loses no in-flight request", sigterm_drain_loses_nothing)
cases.run("fail_open routes by load when scheduling fails", fail_open_routes_by_load)
cases.run("fail_close answers 503 when scheduling fails", fail_close_answers_503)
cases.exit()

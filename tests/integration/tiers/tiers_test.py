"""Two sims sharing one `kvroute store`, behind `kvroute serve` (loopback, speedup 20):

1. A conversation is routed to sim A (B drained for that turn), then evicted from A's GPU and
   host tiers by a long request sent to A directly (which also keeps A busy). Its next turn is
   routed to B: /debug/route shows the router credited B with SHARED blocks (the store's
   events, indexed once, count for every worker), and B answers with cached_tokens > 0, its
   SHARED-tier hit counter agreeing.
2. The store restarts empty on the same ports: the router drops its shared entries (no credit
   for vanished blocks), and the sims keep serving (recompute).

Usage: tiers_test.py <kvroute binary>"""

import json
import os
import re
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "gateway"))
from cluster import (Cases, Proc, SERVE_READY, Sim, check, get, metric_sum, parse_prom,  # noqa: E402
                     post)

binary = sys.argv[1]
cases = Cases()
STORE_READY = re.compile(rb"kvroute store listening on http://([^\s:]+):(\d+) kv_events=(\S+)")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_store(http_port, events_path, replay_port):
    return Proc([binary, "store", "--port", str(http_port), "--block-size", "16",
                 "--capacity-gb", "1000",
                 "--kv-events-endpoint", "ipc://" + events_path,
                 "--kv-events-replay-endpoint", "tcp://127.0.0.1:%d" % replay_port,
                 "--log-level", "warn"], STORE_READY)


def wait_until(what, fn, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if fn():
            return
        time.sleep(0.1)
    raise AssertionError("timed out waiting for: " + what)


def kv_cache(sim):
    return json.loads(get(sim.port, "/debug/kv_cache")[2])


def filler(seed, tokens):
    """A prompt of about `tokens` tokens that shares nothing with the conversation."""
    words, text = 0, "Filler %d." % seed
    while True:
        status, _, body = post(sims[0].port, "/tokenize", {"model": "sim-model", "prompt": text})
        n = json.loads(body)["count"]
        if n >= tokens:
            return text
        add = max(1, (tokens - n) // 3)
        text += "".join(" x%dy%d" % (seed, words + k) for k in range(add))
        words += add


def route(port, body):
    status, _, text = post(port, "/debug/route", body)
    check(status == 200, "debug/route: %d %s" % (status, text))
    return json.loads(text)


# The store binds its events on a unix socket (ipc://, which an engine binds by vLLM's rule):
# local only, and the same address after a restart, for the router's subscriber to reconnect.
events_path = "/tmp/kvroute-tiers-%d.events" % os.getpid()
http_port, replay_port = free_port(), free_port()
store = start_store(http_port, events_path, replay_port)
sims, serve = [], None
tmp = "/tmp/kvroute-tiers-%d.yaml" % os.getpid()
try:
    # Small caches: 96 GPU blocks, 8 host blocks, so two long requests evict a conversation.
    common = ["--num-gpu-blocks", "96", "--num-cpu-blocks", "8",
              "--kv-store", "127.0.0.1:%d" % http_port]
    sims = [Sim(binary, "A", common + ["--speedup", "2"]),
            Sim(binary, "B", common + ["--speedup", "20"])]
    a, b = sims
    cfg = "listen: {host: 127.0.0.1, port: 0}\nworkers:\n" + "".join(s.worker_yaml() for s in sims)
    cfg += ("kv_store:\n  host: 127.0.0.1\n  kv_events:\n    endpoint: \"ipc://%s\"\n"
            "    replay_endpoint: \"tcp://127.0.0.1:%d\"\n" % (events_path, replay_port))
    cfg += "scrape_interval_s: 0.2\nhealth_interval_s: 0.3\n"
    with open(tmp, "w") as f:
        f.write(cfg)
    serve = Proc([binary, "serve", "--config", tmp, "--log-level", "warn"], SERVE_READY)
    port = int(serve.match.group(2))

    prompt = "Shared tier conversation. " + " ".join("fact%d is true." % i for i in range(120))
    turn1 = {"model": "sim-model", "prompt": prompt, "max_tokens": 8, "ignore_eos": True}
    turn2 = dict(turn1, prompt=prompt + " And one more question?")

    def evicted_from_a_is_served_by_b_from_the_store():
        # Turn 1 on A (B drained just for it).
        status, _, text = post(port, "/admin/drain", {"worker": "B"})
        check(status == 200, "drain B: %d %s" % (status, text))
        status, headers, text = post(port, "/v1/completions", turn1)
        check(status == 200 and headers.get("x-kvroute-worker") == "A",
              "turn 1: %d %s %s" % (status, headers.get("x-kvroute-worker"), text))
        status, _, _ = post(port, "/admin/undrain", {"worker": "B"})
        check(status == 200, "undrain B")
        conv = set(kv_cache(a)["tiers"]["GPU"])
        check(len(conv) >= 20, "A cached only %d blocks of the conversation" % len(conv))
        # The store got every block (write-through) and the router indexed its events: with A
        # drained, B is credited with the conversation as SHARED blocks ("credited_blocks_by_tier"
        # is layered: on A itself its GPU copy would hide them).
        post(port, "/admin/drain", {"worker": "A"})
        last = [None]

        def credited():
            last[0] = route(port, turn2)
            return last[0]["chosen"] == "B" and last[0]["credited_blocks_by_tier"][3] >= 20
        try:
            wait_until("the router credits B with the store's blocks", credited)
        finally:
            post(port, "/admin/undrain", {"worker": "A"})
            print("decision with A drained:", json.dumps(last[0])[:400], flush=True)

        # Requests straight to A (not via the router): two ~1,450-token prompts fill its
        # GPU in turn, pushing the conversation to the host tier and then out of it; a third,
        # decoding 1,200 tokens, keeps A busy (A runs 10x slower than B, so for seconds).
        for i in range(2):
            status, _, text = post(a.port, "/v1/completions", {
                "model": "sim-model", "max_tokens": 1, "prompt": filler(i, 1450)}, timeout=120)
            check(status == 200, "filler %d on A: %d %s" % (i, status, text))
        busy = {"model": "sim-model", "max_tokens": 1200, "ignore_eos": True,
                "prompt": filler(7, 150)}
        done = []
        t = threading.Thread(target=lambda: done.append(post(a.port, "/v1/completions", busy,
                                                             timeout=120)))
        t.start()
        try:
            def evicted():
                tiers = kv_cache(a)["tiers"]
                return not (conv & (set(tiers["GPU"]) | set(tiers["CPU"])))
            wait_until("A evicts the conversation from GPU and CPU", evicted)
            wait_until("the router sees A's eviction and A's load", lambda: (
                route(port, turn2)["chosen"] == "B"))
            decision = route(port, turn2)
            check(decision["credited_blocks_by_tier"][3] > 0,
                  "B credited with no shared blocks: %s" % decision)
            before = metric_sum(b.metrics(), "kvroute:kv_tier_hit_tokens_total", tier="SHARED")
            status, headers, text = post(port, "/v1/completions", turn2)
            check(status == 200, "turn 2: %d %s" % (status, text))
            check(headers.get("x-kvroute-worker") == "B", "turn 2 went to %s" %
                  headers.get("x-kvroute-worker"))
            cached = json.loads(text)["usage"]["prompt_tokens_details"]["cached_tokens"]
            check(cached > 0, "B reports cached_tokens %d" % cached)
            after = metric_sum(b.metrics(), "kvroute:kv_tier_hit_tokens_total", tier="SHARED")
            check(after - before == cached,
                  "B's SHARED hits grew by %d, cached_tokens %d" % (after - before, cached))
            # B's own view of its store calls: it asked, and nothing failed.
            bm = b.metrics()
            check(metric_sum(bm, "kvroute:kv_store_client_total", event="matches") > 0,
                  "B counted no store matches")
            for event in ("match_failures", "put_failures", "lease_failures"):
                check(metric_sum(bm, "kvroute:kv_store_client_total", event=event) == 0,
                      "B counted store %s" % event)
        finally:
            t.join(timeout=120)
        check(done and done[0][0] == 200, "filler on A failed: %s" % (done[:1],))

    def a_store_restarted_empty_gets_no_credit():
        global store
        # SHARED's depth counts the store and every faster tier (the index's rule).
        check(route(port, turn2)["cached_blocks_by_tier"][3] > 0, "nothing cached before")
        # The conversation now sits on B's GPU too: drain B so the decision shows A, which
        # holds it only in the store.
        post(port, "/admin/drain", {"worker": "B"})
        check(route(port, turn2)["credited_blocks_by_tier"][3] > 0, "A has no shared credit")
        store.kill()
        store = start_store(http_port, events_path, replay_port)
        wait_until("the router drops the store's entries",
                   lambda: route(port, turn2)["credited_blocks_by_tier"][3] == 0)
        # The sims keep serving; a prompt no one holds is recomputed (no phantom hit).
        fresh = dict(turn1, prompt="A brand new prompt " + "z " * 300)
        status, _, text = post(port, "/v1/completions", fresh)
        check(status == 200, "after restart: %d %s" % (status, text))
        check(json.loads(text)["usage"]["prompt_tokens_details"]["cached_tokens"] == 0,
              "phantom hit: %s" % text)
        store_metrics = parse_prom(get(http_port, "/metrics")[2])
        check(metric_sum(store_metrics, "kvroute_store_stored_total") > 0,
              "the restarted store got no write-through puts")
        post(port, "/admin/undrain", {"worker": "B"})

    cases.run("a conversation evicted from A is served by B from the store",
              evicted_from_a_is_served_by_b_from_the_store)
    cases.run("a store restarted empty gets no credit", a_store_restarted_empty_gets_no_credit)
finally:
    if serve:
        serve.kill()
    for s in sims:
        s.proc.kill()
    store.kill()
    for path in (tmp, events_path):
        if os.path.exists(path):
            os.remove(path)
cases.exit()

"""kvroute serve --etcd following `kvroute sim --etcd` workers, with a real etcd on loopback.
Each case (argv[2]) starts its own etcd, one static sim (w0, from workers[]) and serve, runs a
bounded streaming load loop, and asserts what the clients saw:

  join      a sim registering mid-run gets traffic (the time from its ready line, at which it
            is registered, to its first routed request is printed, not asserted)
  kill9     kill -9 of a registered sim: its lease expires and it leaves serve's fleet; after
            that no request goes to it and none fails
  sigterm   SIGTERM of a registered sim under load: draining first, then it drains and exits;
            zero failed client requests
  probe     sims joining through etcd get the start probe static workers get: a matching one
            has every setting of kvroute_parity_mismatch at 0 and an info line naming it; one
            with another tokenizer is a warning naming it and the setting, gauge 1
  replicas  two kvroute serve replicas with replicas.etcd_prefix: the first registers its URL
            once it listens; the second, started after the first routed some conversations,
            finds it in etcd, warms its index from it before its ready line and routes every
            follow-up where the first does; SIGTERM of the first revokes its key at once
  outage    etcd stopped for 30 s and restarted under load: no request fails; a sim started and
            a sim killed during the outage are joined and removed after it
  warm_discovered
            a replica started late warms the workers it finds in etcd from a sibling's
            snapshot: two `sim --etcd` workers, replica A routes conversations to them; replica
            B (warm_from A, discovery.etcd, no parity probe, so no worker publishes a KV event
            after B subscribes) credits the holder with exactly A's cached blocks and routes
            every follow-up there; a control replica with replicas.warm_keep_s: 0 (discovered
            workers not merged) sees those blocks on no worker; once the holders evicted
            those blocks (filler requests past a 256-block cache) B credits none, as A: its
            first gap repair replayed nothing the snapshot held (no copy counted twice)

Usage: etcd_test.py <kvroute binary> <case>
"""
import json
import os
import re
import signal
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from etcd_cluster import (MODEL, Etcd, EtcdServe, EtcdSim, Load, failures, wait_until,  # noqa: E402
                          one_request)
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "gateway"))
from cluster import Sim, metric_sum, post  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "replicas"))
from replica_cluster import chat, conversation_start, run_conversation  # noqa: E402

BINARY, CASE = sys.argv[1], sys.argv[2]


def check(cond, message):
    if not cond:
        raise AssertionError(message)


def routed_to(results, name, after=0.0):
    return [r for r in results if r[3] == name and r[0] >= after]


def case_join(etcd, serve, static):
    load = Load(serve.port, threads=3)
    time.sleep(1.0)
    s1 = EtcdSim(BINARY, etcd, "s1")
    try:
        got = wait_until(lambda: routed_to(load.snapshot(), "s1"), 30)
        results = load.stop()
        check(got, "s1 never got a request; serve saw %s" % serve.workers())
        first = min(r[0] for r in routed_to(results, "s1"))
        print("join: first request routed to s1 %.3f s after its ready line (registered)"
              % (first - s1.ready_at), flush=True)
        check(not failures(results), "failed requests: %s" % failures(results)[:3])
        check(routed_to(results, "w0"), "the static worker got nothing")
    finally:
        s1.proc.kill()


def case_kill9(etcd, serve, static):
    s1 = EtcdSim(BINARY, etcd, "s1", ttl=2)
    check(wait_until(lambda: "s1" in serve.workers(), 10), "s1 never joined")
    load = Load(serve.port, threads=3)
    check(wait_until(lambda: routed_to(load.snapshot(), "s1"), 30), "s1 got no traffic")
    killed_at = time.time()
    s1.proc.kill()  # SIGKILL: no draining, no revoke; the lease must expire
    gone = wait_until(lambda: "s1" not in serve.workers(), 20)
    left_at = time.time()
    check(gone, "s1 still in the fleet 20 s after kill -9")
    print("kill9: s1 left serve's fleet %.2f s after kill -9 (lease TTL 2 s)"
          % (left_at - killed_at), flush=True)
    time.sleep(2.0)
    results = load.stop()
    after = [r for r in results if r[0] > left_at]
    check(len(after) >= 5, "too few requests after s1 left: %d" % len(after))
    check(not routed_to(after, "s1"), "requests routed to s1 after it left")
    check(not failures(after), "failures after s1 left: %s" % failures(after)[:3])
    window = [r for r in failures(results) if r[0] <= left_at]
    print("kill9: %d request(s) failed between the kill and the lease expiry (in flight on "
          "s1, or streams cut after their first byte)" % len(window), flush=True)
    check(metric_sum(serve.metrics(), "kvroute_discovery_workers") == 0, "discovery count")


def case_sigterm(etcd, serve, static):
    s1 = EtcdSim(BINARY, etcd, "s1", extra=("--shutdown-timeout", "20",
                                             "--etcd-drain-delay", "1"))
    check(wait_until(lambda: "s1" in serve.workers(), 10), "s1 never joined")
    load = Load(serve.port, threads=4)
    check(wait_until(lambda: routed_to(load.snapshot(), "s1"), 30), "s1 got no traffic")
    time.sleep(0.5)
    term_at = time.time()
    s1.proc.signal(signal.SIGTERM)
    code = s1.proc.wait(30)
    exited_at = time.time()
    check(code == 0, "s1 exit status %s: %s" % (code, s1.proc.stderr()[-500:]))
    time.sleep(1.0)
    results = load.stop()
    check(not failures(results), "failed requests: %s" % failures(results)[:3])
    late = [r for r in routed_to(results, "s1") if r[0] > term_at + 1.0]
    print("sigterm: s1 drained and exited %.2f s after SIGTERM; %d request(s) in all, %d to s1 "
          "(%d started later than 1 s after SIGTERM)" % (exited_at - term_at, len(results),
                                                         len(routed_to(results, "s1")), len(late)),
          flush=True)
    check(wait_until(lambda: "s1" not in serve.workers(), 5), "s1 still in the fleet")


def case_outage(etcd, serve, static):
    doomed = EtcdSim(BINARY, etcd, "doomed", ttl=3)
    check(wait_until(lambda: "doomed" in serve.workers(), 10), "doomed never joined")
    load = Load(serve.port, threads=3)
    time.sleep(1.0)
    etcd.stop()
    down_at = time.time()
    check(wait_until(lambda: metric_sum(serve.metrics(), "kvroute_discovery_etcd_connected") == 0,
                     10), "serve does not report etcd down")
    # Changes while etcd is away: a new sim comes up (it cannot register yet) and a
    # registered one dies (its lease cannot expire while etcd is down).
    newcomer = EtcdSim(BINARY, etcd, "newcomer")
    doomed.proc.kill()
    time.sleep(max(0.0, 30.0 - (time.time() - down_at)))
    check("doomed" in serve.workers(), "the last known fleet was not kept during the outage")
    etcd.start()
    up_at = time.time()
    try:
        check(wait_until(lambda: "newcomer" in serve.workers(), 30), "newcomer never joined")
        joined_at = time.time()
        check(wait_until(lambda: "doomed" not in serve.workers(), 30), "doomed never left")
        left_at = time.time()
        print("outage: etcd down %.1f s; after restart newcomer joined in %.2f s, doomed left "
              "in %.2f s (lease TTL 3 s)" % (up_at - down_at, joined_at - up_at,
                                             left_at - up_at), flush=True)
        check(wait_until(lambda: routed_to(load.snapshot(), "newcomer", after=joined_at), 20),
              "newcomer got no traffic")
        time.sleep(1.0)
        results = load.stop()
        m = serve.metrics()
        check(metric_sum(m, "kvroute_discovery_etcd_connected") == 1, "not reconnected")
        check(metric_sum(m, "kvroute_discovery_etcd_failures_total") >= 1, "no failure counted")
        # Requests in flight on `doomed` when it was killed are a dead worker's (the kill, not
        # the outage); every other request must have succeeded.
        bad = [r for r in failures(results) if r[3] != "doomed"]
        check(not bad, "failed requests: %s" % bad[:3])
        print("outage: %d requests, %d failed (all in flight on the killed sim)"
              % (len(results), len(failures(results))), flush=True)
    finally:
        newcomer.proc.kill()


def parity_rows(serve, name):
    return {l["setting"]: v for l, v in serve.metrics().get("kvroute_parity_mismatch", [])
            if l["worker"] == name}


def case_probe(etcd, serve, static):
    # The static worker was probed at start; without a probe on join a discovered worker has
    # no kvroute_parity_mismatch rows at all.
    check(len(parity_rows(serve, "w0")) == 5, parity_rows(serve, "w0"))
    s1 = EtcdSim(BINARY, etcd, "s1")
    try:
        agreed = wait_until(lambda: "key blocks as kvroute does (block size 16): s1"
                            in serve.proc.stderr(), 20)
        check(agreed, "no probe result for s1: %s" % serve.proc.stderr()[-2000:])
        rows = parity_rows(serve, "s1")
        check(len(rows) == 5 and all(v == 0 for v in rows.values()), rows)
        s2 = EtcdSim(BINARY, etcd, "s2", extra=("--tokenizer", "qwen3"))
        try:
            named = wait_until(lambda: parity_rows(serve, "s2").get("tokenizer") == 1, 20)
            check(named, "s2's tokenizer mismatch not reported: %s" % parity_rows(serve, "s2"))
            rows = parity_rows(serve, "s2")
            check(rows.get("chat_template") == 1, rows)
            err = serve.proc.stderr()
            check("parity: worker s2: tokenizer mismatch" in err, err[-2000:])
            check("parity: worker s1:" not in err, "a mismatch named for s1: %s" % err[-2000:])
            check(all(v == 0 for v in parity_rows(serve, "s1").values()),
                  parity_rows(serve, "s1"))
            print("probe: s1 agrees on all 5 settings; s2 (qwen3 tokenizer) named for %s"
                  % sorted(k for k, v in rows.items() if v == 1), flush=True)
        finally:
            s2.proc.kill()
    finally:
        s1.proc.kill()


REPLICA_PREFIX = "/kvroute/replicas/"


def replica_keys(etcd):
    import base64
    enc = lambda t: base64.b64encode(t.encode()).decode()  # noqa: E731
    r = etcd.call("/v3/kv/range", {"key": enc(REPLICA_PREFIX),
                                   "range_end": enc(REPLICA_PREFIX[:-1] + "0")})
    return sorted(json.loads(base64.b64decode(kv["value"]))["url"] for kv in r.get("kvs", []))


def decision(port, body):
    status, _, text = post(port, "/debug/route", body)
    return json.loads(text).get("chosen") if status == 200 else None


def case_replicas(etcd, serve, static):
    second = Sim(BINARY, "w1", ["--speedup", "20"])
    first = later = None
    with tempfile.TemporaryDirectory() as d1, tempfile.TemporaryDirectory() as d2:
        try:
            yaml = ("workers:\n" + static.worker_yaml() + second.worker_yaml() +
                    "replicas: {etcd_prefix: %s}\n" % REPLICA_PREFIX)
            first = EtcdServe(BINARY, etcd, d1, yaml)
            first_url = "http://127.0.0.1:%d" % first.port
            check(wait_until(lambda: replica_keys(etcd) == [first_url], 5),
                  "the first replica's key: %s" % replica_keys(etcd))
            histories = [conversation_start(i, "etcd replicas") for i in range(4)]
            threads = [threading.Thread(target=run_conversation, args=(first.port, h, 2))
                       for h in histories]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=60)
            bodies = [{"model": MODEL, "max_tokens": 4,
                       "messages": h + [{"role": "user", "content": "next"}]} for h in histories]
            holders = [decision(first.port, b) for b in bodies]
            later = EtcdServe(BINARY, etcd, d2, yaml)
            err = later.proc.stderr()
            check("replicas: index warmed from %s" % first_url in err, err[-2000:])
            theirs = [decision(later.port, b) for b in bodies]
            print("replicas: the late replica warmed from %s (found in etcd); follow-ups "
                  "%s there, %s on the first" % (first_url, theirs, holders), flush=True)
            check(theirs == holders and None not in holders, (theirs, holders))
            check(len(replica_keys(etcd)) == 2, replica_keys(etcd))
            first.proc.signal(signal.SIGTERM)
            check(wait_until(lambda: first_url not in replica_keys(etcd), 2.0),
                  "the draining replica's key is still there: %s" % replica_keys(etcd))
            check(first.proc.wait(30) == 0, "the first replica's exit status")
        finally:
            for p in (first, later):
                if p:
                    p.proc.kill()
            second.proc.kill()


def route_view(port, body):
    """/debug/route: (chosen worker, {worker: cached_any_blocks})."""
    status, _, text = post(port, "/debug/route", body)
    check(status == 200, "/debug/route answered %d: %s" % (status, text[:300]))
    j = json.loads(text)
    return j.get("chosen"), {c["worker"]: c.get("cached_any_blocks", 0) for c in j["candidates"]}


def case_warm_discovered(etcd, serve, static):
    # A small GPU cache, so that filler requests can evict the conversations' blocks.
    sims = [EtcdSim(BINARY, etcd, name, extra=("--num-gpu-blocks", "256"))
            for name in ("s1", "s2")]
    replicas = []
    dirs = [tempfile.TemporaryDirectory() for _ in range(3)]
    try:
        # The fixture's replica probes each sim once it joins (a KV event); let that pass
        # first, so nothing publishes while the late replicas look.
        for name in ("s1", "s2"):
            check(wait_until(lambda: len(parity_rows(serve, name)) == 5, 20),
                  "%s was not probed by the fixture's replica" % name)
        quiet = "parity_probe: false\n"
        yaml = quiet + "replicas: {etcd_prefix: %s}\n" % REPLICA_PREFIX
        first = EtcdServe(BINARY, etcd, dirs[0].name, yaml)
        replicas.append(first)
        first_url = "http://127.0.0.1:%d" % first.port
        check(wait_until(lambda: {"s1", "s2"} <= first.workers(), 10), first.workers())
        histories = [conversation_start(i, "warm discovered") for i in range(4)]
        for h in histories:
            seen = run_conversation(first.port, h, 2)
            check(all(st == 200 for st, _ in seen), seen)
        bodies = [{"model": MODEL, "max_tokens": 8, "ignore_eos": True,
                   "messages": h + [{"role": "user", "content": "next"}]} for h in histories]

        def credited(port):  # every follow-up's chosen worker holds some of its blocks
            views = [route_view(port, b) for b in bodies]
            return views if all(c and cached.get(c, 0) > 0 for c, cached in views) else None
        # A's view once the sims' events of those turns have arrived.
        views = wait_until(lambda: credited(first.port), 10)
        check(views, "A never saw the conversations' blocks")
        holders = [chosen for chosen, _ in views]
        check(set(holders) <= {"s1", "s2"}, holders)
        late_yaml = quiet + ("replicas: {etcd_prefix: %s, warm_from: [%s]%s}\n")

        # Control: the snapshot is not kept past the static joins, so the discovered sims are
        # not merged, and no event arrives to warm them either.
        cold = EtcdServe(BINARY, etcd, dirs[1].name,
                         late_yaml % (REPLICA_PREFIX, first_url, ", warm_keep_s: 0"))
        replicas.append(cold)
        check("replicas: index warmed from %s" % first_url in cold.proc.stderr(),
              cold.proc.stderr()[-2000:])
        cold_views = [route_view(cold.port, b) for b in bodies]
        check(all(v == 0 for _, cached in cold_views for v in cached.values()),
              "the control replica credits blocks it was not given: %s" % cold_views)
        cold.proc.signal(signal.SIGTERM)
        check(cold.proc.wait(30) == 0, "the control replica's exit status")

        late = EtcdServe(BINARY, etcd, dirs[2].name, late_yaml % (REPLICA_PREFIX, first_url, ""))
        replicas.append(late)
        err = late.proc.stderr()
        for name in set(holders):
            line = r"replicas: worker %s \(id \d+\) warmed from %s's snapshot: [1-9]" % (
                name, re.escape(first_url))
            check(re.search(line, err), err[-2000:])
        late_views = [route_view(late.port, b) for b in bodies]
        for (chosen, cached), (a_chosen, a_cached) in zip(late_views, views):
            check(chosen == a_chosen, (late_views, views))
            check(cached[chosen] == a_cached[a_chosen] > 0, (late_views, views))
        # And the follow-ups themselves go there. Their KV events are the first the late
        # replica's subscribers see: the gap repair they start must replay only what A's
        # snapshot lacks (from its applied seq + 1), not the batches the snapshot holds.
        routed = [run_conversation(late.port, list(b["messages"]), 1)[0] for b in bodies]
        check([w for _, w in routed] == holders, (routed, holders))
        credits = [c[h] for (_, c), h in zip(late_views, holders)]
        check("its subscriber resumes at" in late.proc.stderr(), late.proc.stderr()[-2000:])

        # The holders evict the conversations' blocks (filler requests straight to the sims,
        # past their 256-block caches): A credits none any more, and neither may the late
        # replica. A replay of the snapshot's batches on top of it would have counted their
        # copies twice, so one eviction would have left each of them credited.
        ports = {sim.name: sim.port for sim in sims}

        def none_credited(port):
            views = [route_view(port, b) for b in bodies]
            return views if all(v == 0 for _, cached in views for v in cached.values()) else None
        fillers = 0
        while not none_credited(first.port) and fillers < 240:
            for name in sorted(set(holders)):
                text = "filler %s %d: " % (name, fillers) + " ".join(
                    "w%d_%d" % (fillers, k) for k in range(400))
                st, _, _ = chat(ports[name], [{"role": "user", "content": text}], max_tokens=4)
                check(st == 200, "a filler request to %s answered %s" % (name, st))
            fillers += 1
            if fillers % 8 == 0:
                wait_until(lambda: none_credited(first.port), 1)
        check(wait_until(lambda: none_credited(first.port), 10),
              "A still credits the conversations after %d fillers per holder" % fillers)
        late_after = wait_until(lambda: none_credited(late.port), 10)
        check(late_after, "the late replica still credits evicted blocks (copies counted twice "
              "by a replay over the snapshot): %s" % [route_view(late.port, b) for b in bodies])
        print("warm_discovered: late replica credits %s blocks on %s as A does (control: 0) and "
              "routes the follow-ups there; after %d filler(s) per holder evicted them it "
              "credits none, as A" % (credits, holders, fillers), flush=True)
    finally:
        for r in replicas:
            r.proc.kill()
        for sim in sims:
            sim.proc.kill()
        for d in dirs:
            d.cleanup()


CASES = {"warm_discovered": case_warm_discovered, "join": case_join, "probe": case_probe, "replicas": case_replicas, "kill9": case_kill9, "sigterm": case_sigterm, "outage": case_outage}


def main():
    if not os.access("/usr/bin/etcd", os.X_OK):
        print("skip: no /usr/bin/etcd")
        return 0
    with tempfile.TemporaryDirectory() as workdir:
        etcd = Etcd(workdir)
        etcd.start()
        static = Sim(BINARY, "w0", ["--speedup", "20"])
        serve = None
        try:
            serve = EtcdServe(BINARY, etcd, workdir, "workers:\n" + static.worker_yaml())
            CASES[CASE](etcd, serve, static)
            print("ok   " + CASE, flush=True)
            return 0
        except Exception as e:  # noqa: BLE001
            import traceback
            traceback.print_exc()
            if serve:
                print("--- serve stderr (tail)\n" + serve.proc.stderr()[-3000:])
            print("FAIL " + CASE + ": " + str(e))
            return 1
        finally:
            if serve:
                serve.proc.kill()
            static.proc.kill()
            etcd.stop()


if __name__ == "__main__":
    sys.exit(main())

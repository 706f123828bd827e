"""A stream survives its worker (issue 21): kill -9 of a sim under a bounded streaming load of
chat and completion requests (ignore_eos, a fixed max_tokens). Every stream must go on on
another worker: zero failed requests, each stream exactly max_tokens token events and one
[DONE], no error event; with include_usage, completion_tokens = max_tokens;
kvroute_stream_migrations_total counts the resumed streams and no failed migration.

  static   kvroute serve in front of 3 sims (workers[]), the middle one killed
  etcd     two kvroute serve replicas following `kvroute sim --etcd` workers (a real etcd on
           loopback); a registered sim killed: its streams on both replicas continue, its
           lease expires and it leaves every replica's fleet

Usage: migration_test.py <kvroute binary> <case>
"""
import http.client
import json
import os
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "gateway"))
sys.path.insert(0, os.path.join(HERE, "..", "etcd"))
from cluster import Cluster, Sim, check, metric_sum, parse_prom, get, wait_until  # noqa: E402
from etcd_cluster import Etcd, EtcdServe, EtcdSim  # noqa: E402

BINARY, CASE = sys.argv[1], sys.argv[2]
MODEL = "sim-model"
FAILED_OUTCOMES = ("no_worker", "failed", "unsupported", "limit")


def body_of(i, max_tokens):
    """Request i of the load: chat or completion, every other pair with include_usage."""
    body = {"model": MODEL, "max_tokens": max_tokens, "ignore_eos": True, "stream": True}
    if i % 4 >= 2:
        body["stream_options"] = {"include_usage": True}
    if i % 2 == 0:
        body["messages"] = [{"role": "user", "content": "migration load request %d" % i}]
        return "/v1/chat/completions", body
    body["prompt"] = "migration load request %d, a completion" % i
    return "/v1/completions", body


def token_events(path, events):
    """Token events of a stream (the chat role chunk excepted), its usage, an error if any."""
    tokens, usage, error = 0, None, None
    for e in events:
        if e == "[DONE]":
            continue
        obj = json.loads(e)
        if "error" in obj:
            error = obj["error"]
            continue
        if obj.get("usage"):
            usage = obj["usage"]
        for choice in obj.get("choices") or []:
            if path == "/v1/completions":
                tokens += "text" in choice
            else:
                delta = choice.get("delta") or {}
                if "role" in delta and not delta.get("content"):
                    continue
                tokens += "content" in delta
    return tokens, usage, error


class StreamLoad:
    """`requests` streamed requests on `threads` client threads, spread over `ports` (the
    replicas). Records per request: worker header, status, token events, [DONE]s, error."""

    def __init__(self, ports, requests, threads, max_tokens):
        self.ports, self.max_tokens = ports, max_tokens
        self.lock = threading.Lock()
        self.next = 0
        self.total = requests
        self.results = []
        self.open = {}  # request index -> worker, while its stream is being read
        self.threads = [threading.Thread(target=self.loop, daemon=True) for _ in range(threads)]
        for t in self.threads:
            t.start()

    def loop(self):
        while True:
            with self.lock:
                if self.next >= self.total:
                    return
                i = self.next
                self.next += 1
            self.results_append(self.one(i))

    def results_append(self, r):
        with self.lock:
            self.results.append(r)

    def one(self, i):
        path, body = body_of(i, self.max_tokens)
        port = self.ports[i % len(self.ports)]
        out = {"i": i, "path": path, "usage_asked": "stream_options" in body, "worker": "",
               "status": 0, "tokens": 0, "dones": 0, "error": None, "usage": None,
               "started": time.time()}
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        try:
            conn.request("POST", path, body=json.dumps(body),
                         headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            out["status"] = r.status
            out["worker"] = r.getheader("x-kvroute-worker") or ""
            with self.lock:
                self.open[i] = out["worker"]
            text = r.read().decode(errors="replace")
            events = [l[6:] for l in text.split("\n") if l.startswith("data: ")]
            out["dones"] = events.count("[DONE]")
            out["tokens"], out["usage"], out["error"] = token_events(path, events)
        except (OSError, http.client.HTTPException, ValueError) as e:
            out["error"] = repr(e)
        finally:
            conn.close()
            with self.lock:
                self.open.pop(i, None)
            out["ended"] = time.time()
        return out

    def open_on(self, worker):
        with self.lock:
            return sum(1 for w in self.open.values() if w == worker)

    def join(self, timeout):
        deadline = time.time() + timeout
        for t in self.threads:
            t.join(timeout=max(0.1, deadline - time.time()))
        check(not any(t.is_alive() for t in self.threads), "the load did not finish in time")
        return sorted(self.results, key=lambda r: r["i"])


def check_streams(results, max_tokens, victim, killed_at):
    bad = [r for r in results
           if r["status"] != 200 or r["error"] or r["dones"] != 1 or r["tokens"] != max_tokens]
    check(not bad, "%d stream(s) broken, e.g. %s" % (len(bad), bad[:3]))
    for r in results:
        if r["usage_asked"]:
            check(r["usage"] and r["usage"]["completion_tokens"] == max_tokens,
                  "usage of request %d: %s" % (r["i"], r["usage"]))
    cut = [r for r in results if r["worker"] == victim and r["started"] < killed_at < r["ended"]]
    check(cut, "no stream was on %s when it was killed" % victim)
    return cut


def migration_counts(metrics_list):
    def total(outcome):
        return sum(metric_sum(m, "kvroute_stream_migrations_total", outcome=outcome)
                   for m in metrics_list)
    return total("resumed"), {o: total(o) for o in FAILED_OUTCOMES}


def kill_when_streaming(load, victim_name, proc, wanted=2, timeout=20):
    check(wait_until(lambda: load.open_on(victim_name) >= wanted, timeout, 0.01),
          "%s never had %d open streams" % (victim_name, wanted))
    time.sleep(0.1)  # a few tokens into them
    killed_at = time.time()
    proc.kill()  # SIGKILL, by its pid
    return killed_at


def case_static():
    max_tokens = 150
    with Cluster(BINARY, n=3, speedup=2) as c:
        load = StreamLoad([c.port], requests=24, threads=8, max_tokens=max_tokens)
        killed_at = kill_when_streaming(load, "w1", c.sim("w1").proc)
        results = load.join(90)
        cut = check_streams(results, max_tokens, "w1", killed_at)
        resumed, failed = migration_counts([parse_prom(get(c.port, "/metrics")[2])])
        print("static: %d streams, %d on w1 when it was killed, %d resumed elsewhere; "
              "failed migrations %s" % (len(results), len(cut), resumed, failed), flush=True)
        check(resumed >= len(cut) - 1 and resumed >= 1, "resumed %d < cut %d" % (resumed, len(cut)))
        check(not any(failed.values()), "failed migrations: %s" % failed)


def case_etcd():
    if not os.access("/usr/bin/etcd", os.X_OK):
        print("skip: no /usr/bin/etcd")
        return
    max_tokens = 1200  # EtcdSim runs at speedup 20: ~1 s a stream
    with tempfile.TemporaryDirectory() as workdir:
        etcd = Etcd(workdir)
        etcd.start()
        static = Sim(BINARY, "w0", ["--speedup", "20"])
        sims, replicas = [], []
        try:
            sims = [EtcdSim(BINARY, etcd, name, ttl=2) for name in ("s1", "s2")]
            for k in range(2):
                d = os.path.join(workdir, "replica%d" % k)
                os.mkdir(d)
                replicas.append(EtcdServe(BINARY, etcd, d, "workers:\n" + static.worker_yaml()))
            for r in replicas:
                check(wait_until(lambda: {"s1", "s2"} <= r.workers(), 10), "sims never joined")
            load = StreamLoad([r.port for r in replicas], requests=36, threads=9,
                              max_tokens=max_tokens)
            killed_at = kill_when_streaming(load, "s1", sims[0].proc)
            for r in replicas:
                check(wait_until(lambda: "s1" not in r.workers(), 20),
                      "s1 still in a replica's fleet 20 s after kill -9")
            left_at = time.time()
            results = load.join(110)
            cut = check_streams(results, max_tokens, "s1", killed_at)
            resumed, failed = migration_counts([r.metrics() for r in replicas])
            print("etcd: %d streams over 2 replicas, %d on s1 when it was killed, %d resumed; "
                  "s1 left both fleets %.2f s after kill -9 (lease TTL 2 s); failed migrations %s"
                  % (len(results), len(cut), resumed, left_at - killed_at, failed), flush=True)
            check(resumed >= len(cut) - 1 and resumed >= 1, "resumed %d < cut %d" % (resumed, len(cut)))
            check(not any(failed.values()), "failed migrations: %s" % failed)
        finally:
            for p in replicas + sims:
                p.proc.kill()
            static.proc.kill()
            etcd.stop()


CASES = {"static": case_static, "etcd": case_etcd}

if __name__ == "__main__":
    try:
        CASES[CASE]()
        print("ok   " + CASE, flush=True)
    except Exception as e:  # noqa: BLE001 - report and fail
        import traceback
        traceback.print_exc()
        print("FAIL %s: %s" % (CASE, e), flush=True)
        sys.exit(1)

"""The replica booking delta stream (docs/replicas.md) between two `kvroute serve` replicas
that find each other in a real etcd (/usr/bin/etcd on loopback), in front of two sims:

1. each replica follows the other (kvroute_replica_peers 1 on both);
2. a long streamed request routed by A is in B's load view (B's
   kvroute_worker_inflight_requests on that worker, and kvroute_replica_remote_bookings) within
   2 s, while A counts it once (not echoed back); it leaves B's view within 2 s of finishing;
3. A stopped (SIGSTOP) with a request in flight: its stream goes silent, B drops A's bookings
   after its 2 s idle bound (within 4 s); A continued (SIGCONT): B follows it again and the
   new stream's replay brings the request that is still in flight back into B's view;
4. kill -9 of A while that request is in flight: B drops A's bookings within 3 s (the
   stream's EOF) and B's peer count goes to 0.

Usage: deltas_test.py <kvroute binary>. Stops only the processes it started, by pid.
"""
import json
import os
import signal
import sys
import tempfile
import threading
import time
import http.client

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "etcd"))
from etcd_cluster import MODEL, Etcd, EtcdServe  # noqa: E402
sys.path.insert(0, os.path.join(HERE, "..", "gateway"))
from cluster import Sim, check, metric_sum, wait_until  # noqa: E402

BINARY = sys.argv[1]
PREFIX = "/kvroute/test-deltas/"
# At --speedup 1 the sims' default profile decodes ~30-60 tokens/s: a few seconds per request.
SPEEDUP, LONG_TOKENS = "1", 200


def long_stream(port, out, tag, tokens=LONG_TOKENS):
    """One streamed chat through `port` that lasts seconds; appends (status, worker, s)."""
    body = {"model": MODEL, "stream": True, "max_tokens": tokens, "ignore_eos": True,
            "messages": [{"role": "user", "content": "a long answer for %s" % tag}]}
    t0 = time.time()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("POST", "/v1/chat/completions", body=json.dumps(body),
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        r.read()
        out.append((r.status, r.getheader("x-kvroute-worker") or "", time.time() - t0))
    except (OSError, http.client.HTTPException) as e:
        out.append((0, repr(e), time.time() - t0))
    finally:
        conn.close()


def inflight(serve, worker=None):
    m = serve.metrics()
    if worker:
        return metric_sum(m, "kvroute_worker_inflight_requests", worker=worker)
    return metric_sum(m, "kvroute_worker_inflight_requests")


def gauge(serve, name):
    return metric_sum(serve.metrics(), name)


def main():
    if not os.access("/usr/bin/etcd", os.X_OK):
        print("skip: no /usr/bin/etcd")
        return 0
    sims, a, b = [], None, None
    with tempfile.TemporaryDirectory() as work:
        etcd = Etcd(work)
        etcd.start()
        try:
            sims = [Sim(BINARY, "w%d" % i, ["--speedup", SPEEDUP]) for i in range(2)]
            yaml = ("workers:\n" + "".join(s.worker_yaml() for s in sims) +
                    "replicas: {etcd_prefix: %s}\n" % PREFIX)
            da, db = os.path.join(work, "a"), os.path.join(work, "b")
            os.makedirs(da)
            os.makedirs(db)
            a = EtcdServe(BINARY, etcd, da, yaml)
            b = EtcdServe(BINARY, etcd, db, yaml)
            check(wait_until(lambda: gauge(a, "kvroute_replica_peers") == 1 and
                             gauge(b, "kvroute_replica_peers") == 1, 5),
                  "peers: A %s, B %s" % (gauge(a, "kvroute_replica_peers"),
                                         gauge(b, "kvroute_replica_peers")))

            # 2. A's booking in B's view, counted once on A, gone after it finishes.
            done = []
            t = threading.Thread(target=long_stream, args=(a.port, done, "visible"))
            t.start()
            worker = wait_until(lambda: next((l["worker"] for l, v in a.metrics().get(
                "kvroute_worker_inflight_requests", []) if v == 1), None), 5, 0.02)
            check(worker, "A never showed its request in flight")
            seen_at = time.time()
            check(wait_until(lambda: inflight(b, worker) == 1, 2.0, 0.02),
                  "B's view of %s: %s" % (worker, inflight(b, worker)))
            lag = time.time() - seen_at
            check(gauge(b, "kvroute_replica_remote_bookings") == 1, "B's remote bookings")
            check(inflight(a) == 1 and gauge(a, "kvroute_replica_remote_bookings") == 0,
                  "A counts its own request %s times, %s remote" %
                  (inflight(a), gauge(a, "kvroute_replica_remote_bookings")))
            check(not done, "the request ended before B was asked (%s): make it longer" % done)
            t.join(timeout=60)
            check(done and done[0][0] == 200, "the long request: %s" % done)
            ended_at = time.time()
            check(wait_until(lambda: inflight(b) == 0, 2.0, 0.02), "B still counts it")
            gone = time.time() - ended_at
            print("deltas: A's request on %s in B's view %.3f s after A's; gone from B %.3f s "
                  "after it ended (it lasted %.2f s)" % (worker, lag, gone, done[0][2]),
                  flush=True)

            # 3. A silent: B drops its bookings after the idle bound; A back: the replay.
            done2 = []
            t2 = threading.Thread(target=long_stream,
                                  args=(a.port, done2, "stopped", LONG_TOKENS * 4))
            t2.start()
            check(wait_until(lambda: gauge(b, "kvroute_replica_remote_bookings") == 1, 5, 0.02),
                  "B never saw A's second request")
            a.proc.signal(signal.SIGSTOP)
            stopped_at = time.time()
            try:
                check(wait_until(lambda: gauge(b, "kvroute_replica_remote_bookings") == 0, 4.0,
                                 0.02), "B still holds the silent A's booking")
                silent = time.time() - stopped_at
            finally:
                a.proc.signal(signal.SIGCONT)
            check(silent >= 1.0, "dropped %.2f s after SIGSTOP: before the idle bound" % silent)
            check(wait_until(lambda: gauge(b, "kvroute_replica_peers") == 1 and
                             gauge(b, "kvroute_replica_remote_bookings") == 1, 5, 0.02),
                  "B did not follow A again with its request replayed: peers %s, remote %s, "
                  "request %s" % (gauge(b, "kvroute_replica_peers"),
                                  gauge(b, "kvroute_replica_remote_bookings"), done2))
            print("deltas: SIGSTOP of A: B dropped its booking %.3f s later; after SIGCONT the "
                  "replay brought it back" % silent, flush=True)

            # 4. kill -9 of A drops A's bookings on B.
            a.proc.kill()
            killed_at = time.time()
            check(wait_until(lambda: gauge(b, "kvroute_replica_remote_bookings") == 0 and
                             inflight(b) == 0, 3.0, 0.02),
                  "B still holds A's bookings: %s" % gauge(b, "kvroute_replica_remote_bookings"))
            dropped = time.time() - killed_at
            check(wait_until(lambda: gauge(b, "kvroute_replica_peers") == 0, 3.0, 0.05),
                  "B still follows the killed A")
            t2.join(timeout=60)
            print("deltas: kill -9 of A: B dropped its bookings %.3f s later" % dropped,
                  flush=True)
            print("ok   replica_deltas", flush=True)
            return 0
        except Exception as e:  # noqa: BLE001
            import traceback
            traceback.print_exc()
            for name, s in (("A", a), ("B", b)):
                if s:
                    print("--- %s stderr (tail)\n%s" % (name, s.proc.stderr()[-2000:]))
            print("FAIL replica_deltas: %s" % e)
            return 1
        finally:
            for s in (a, b):
                if s:
                    s.proc.kill()
            for s in sims:
                s.proc.kill()
            etcd.stop()


if __name__ == "__main__":
    sys.exit(main())

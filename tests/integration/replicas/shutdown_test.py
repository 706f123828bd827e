"""The shutdown timeline of one kvroute serve replica (docs/shutdown.md), measured from the
outside: what a client sees at each moment after SIGTERM, against the configured times.

  timeline   /ready answers 503 at once; a new request during the grace period is still
             served; the listener closes at shutdown_grace_s; streams in flight finish with
             [DONE] and no error; the process exits 0 soon after the last one ends, within
             grace + drain_timeout + teardown (gateway/shutdown_timeline.h)
  deadline   a stream longer than the drain timeout is cut at grace + drain_timeout, and the
             process exits within the teardown allowance after that
  check      `kvroute config check` warns (stderr, exit 0) when termination_grace_s is below
             grace + drain + teardown or balancer_notice_s above the grace, and not otherwise

Usage: shutdown_test.py <kvroute binary>"""

import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gateway"))
from cluster import Cases, Cluster, check, post  # noqa: E402

BINARY = sys.argv[1]
TEARDOWN_S = 6.0  # gateway::kShutdownTeardownS
cases = Cases()


def stream(port, tag, tokens, out):
    """One long streamed completion; appends (end time, status, [events]) to `out`."""
    body = {"model": "sim-model", "prompt": "%s " % tag + "long " * 100, "max_tokens": tokens,
            "ignore_eos": True, "stream": True}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("POST", "/v1/completions", body=json.dumps(body),
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        events = []
        try:
            text = r.read().decode(errors="replace")
        except (http.client.IncompleteRead, OSError) as e:
            text = getattr(e, "partial", b"").decode(errors="replace")
        events = [l[6:] for l in text.split("\n") if l.startswith("data: ")]
        out.append((time.time(), r.status, events))
    except (OSError, http.client.HTTPException) as e:
        out.append((time.time(), 0, [repr(e)]))
    finally:
        conn.close()


def clean(events):
    return events and events[-1] == "[DONE]" and not any(e.startswith('{"error"') for e in events)


class Watcher:
    """Polls /ready on fresh connections every 20 ms: when it first answered 503 and when a
    connection was first refused."""

    def __init__(self, port):
        self.port, self.ready_503, self.refused = port, None, None
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.deadline = time.time() + 60
        self.thread.start()

    def loop(self):
        while self.refused is None and time.time() < self.deadline:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
            try:
                conn.request("GET", "/ready")
                status = conn.getresponse().status
                if status == 503 and self.ready_503 is None:
                    self.ready_503 = time.time()
            except ConnectionRefusedError:
                self.refused = time.time()
            except (OSError, http.client.HTTPException):
                pass  # a connection closed by the listener's close: try again
            finally:
                conn.close()
            time.sleep(0.02)


def wait_exit(proc, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.p.poll() is not None:
            return time.time(), proc.p.returncode
        time.sleep(0.01)
    return None, None


def timeline():
    grace, drain = 2.0, 30.0
    with Cluster(BINARY, n=2, speedup=10, extra_yaml="shutdown_grace_s: %g\ndrain_timeout_s: %g\n"
                 % (grace, drain)) as c:
        ends = []
        threads = [threading.Thread(target=stream, args=(c.port, "t%d" % i, 3000, ends))
                   for i in range(3)]
        for t in threads:
            t.start()
        time.sleep(0.5)  # the streams are under way
        t0 = time.time()
        c.serve.signal(signal.SIGTERM)
        watcher = Watcher(c.port)
        time.sleep(grace / 2)
        status, _, text = post(c.port, "/v1/completions",
                               {"model": "sim-model", "prompt": "during the grace", "max_tokens": 3},
                               timeout=10)
        during_grace = time.time() - t0
        check(status == 200, "a request %.2f s into the grace period: %d %s"
              % (during_grace, status, text[:200]))
        exited, rc = wait_exit(c.serve, grace + drain + TEARDOWN_S + 5)
        for t in threads:
            t.join(timeout=30)
        watcher.thread.join(timeout=5)
        check(exited is not None, "serve still running %.0f s after SIGTERM" % (time.time() - t0))
        check(rc == 0, "exit status %s" % rc)
        check(watcher.ready_503 is not None, "/ready never answered 503")
        check(watcher.refused is not None, "no new connection was refused")
        last_end = max(e[0] for e in ends)
        print("timeline: /ready 503 at +%.3f s; request served at +%.2f s; listener closed at "
              "+%.3f s (grace %g s); last stream ended at +%.2f s; exit at +%.2f s (%.2f s "
              "after the last stream; bound grace+drain+teardown = %g s)"
              % (watcher.ready_503 - t0, during_grace, watcher.refused - t0, grace,
                 last_end - t0, exited - t0, exited - last_end, grace + drain + TEARDOWN_S),
              flush=True)
        check(watcher.ready_503 - t0 <= 0.3, "/ready 503 only after %.3f s" % (watcher.ready_503 - t0))
        check(grace - 0.05 <= watcher.refused - t0 <= grace + 0.6,
              "listener closed at +%.3f s, grace %g s" % (watcher.refused - t0, grace))
        check(len(ends) == 3 and all(s == 200 and clean(ev) for _, s, ev in ends),
              "a stream failed: %s" % [(s, ev[-2:]) for _, s, ev in ends])
        check(last_end > watcher.refused, "every stream ended before the listener closed: the "
              "case proves nothing (raise max_tokens)")
        check(exited - last_end <= 1.5, "exit %.2f s after the last stream" % (exited - last_end))
        check(exited - t0 <= grace + drain + TEARDOWN_S, "exit after the bound")


def deadline():
    grace, drain = 0.5, 1.5
    with Cluster(BINARY, n=1, speedup=2, extra_yaml="shutdown_grace_s: %g\ndrain_timeout_s: %g\n"
                 % (grace, drain)) as c:
        ends = []
        t = threading.Thread(target=stream, args=(c.port, "cut", 3000, ends))
        t.start()
        time.sleep(0.5)
        t0 = time.time()
        c.serve.signal(signal.SIGTERM)
        exited, rc = wait_exit(c.serve, grace + drain + TEARDOWN_S + 5)
        t.join(timeout=30)
        check(exited is not None, "serve did not exit")
        check(rc == 0, "exit status %s" % rc)
        check(len(ends) == 1, ends)
        end, status, events = ends[0]
        print("deadline: the stream was cut at +%.2f s (grace + drain = %g s); exit at +%.2f s "
              "(%.2f s after the deadline; teardown allowance %g s)"
              % (end - t0, grace + drain, exited - t0, exited - t0 - grace - drain, TEARDOWN_S),
              flush=True)
        check(not clean(events), "the stream finished: the case proves nothing")
        check(grace + drain - 0.1 <= end - t0 <= grace + drain + 1.0,
              "cut at +%.2f s" % (end - t0))
        check(exited - t0 <= grace + drain + TEARDOWN_S, "exit after the bound")
        check("1 request(s) cut" in c.serve.stderr(), c.serve.stderr()[-500:])


def config_check():
    with tempfile.TemporaryDirectory() as d:
        def run(extra):
            path = os.path.join(d, "c.yaml")
            with open(path, "w") as f:
                f.write("workers:\n  - {name: w0, url: 'http://127.0.0.1:1', models: [m]}\n"
                        "shutdown_grace_s: 2\ndrain_timeout_s: 30\n" + extra)
            p = subprocess.run([BINARY, "config", "check", "--config", path],
                               stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
            return p.returncode, p.stderr.decode()

        rc, err = run("termination_grace_s: 30\nbalancer_notice_s: 5\n")
        check(rc == 0, err)
        check("termination_grace_s (30 s) < shutdown_grace_s + drain_timeout_s" in err, err)
        check("balancer_notice_s (5 s) > shutdown_grace_s (2 s)" in err, err)
        rc, err = run("termination_grace_s: 45\nbalancer_notice_s: 2\n")
        check(rc == 0 and "warning" not in err, err)


cases.run("the timeline: readiness, grace, listener, drain, exit", timeline)
cases.run("a stream past the drain deadline is cut, then the process exits", deadline)
cases.run("config check warns when an invariant is broken", config_check)
cases.exit()

"""Loopback clusters with a real etcd (/usr/bin/etcd) for the etcd integration tests: etcd on
free ports with a temp data dir, `kvroute serve --etcd`, `kvroute sim --etcd`, and a bounded
load loop that records what every client request saw. Processes are stopped by their own pid."""

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import http.client

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "gateway"))
from cluster import Proc, SIM_READY, SERVE_READY, get, parse_prom  # noqa: E402

ETCD = "/usr/bin/etcd"
MODEL = "sim-model"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Etcd:
    def __init__(self, workdir):
        self.dir = workdir
        self.client_port = free_port()
        self.peer_port = free_port()
        self.p = None
        self.log = open(os.path.join(workdir, "etcd.log"), "ab")

    @property
    def endpoint(self):
        return "http://127.0.0.1:%d" % self.client_port

    def start(self, timeout=20):
        c, p = "http://127.0.0.1:%d" % self.client_port, "http://127.0.0.1:%d" % self.peer_port
        self.p = subprocess.Popen(
            [ETCD, "--name", "t", "--data-dir", os.path.join(self.dir, "data"),
             "--listen-client-urls", c, "--advertise-client-urls", c,
             "--listen-peer-urls", p, "--initial-advertise-peer-urls", p,
             "--initial-cluster", "t=" + p, "--log-level", "warn"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                if self.call("/v3/kv/range", {"key": "Lw=="}) is not None:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("etcd did not start")

    def call(self, path, body):
        conn = http.client.HTTPConnection("127.0.0.1", self.client_port, timeout=3)
        try:
            conn.request("POST", path, body=json.dumps(body))
            r = conn.getresponse()
            return json.loads(r.read() or b"{}")
        finally:
            conn.close()

    def stop(self):
        if self.p and self.p.poll() is None:
            self.p.terminate()
            self.p.wait(timeout=15)
        self.p = None


class EtcdSim:
    """`kvroute sim --etcd`; registered (etcd up) when its ready line appears."""

    def __init__(self, binary, etcd, name, ttl=3, extra=()):
        self.name = name
        self.proc = Proc([binary, "sim", "--host", "127.0.0.1", "--port", "0",
                          "--kv-events-endpoint", "tcp://*:0",
                          "--kv-events-replay-endpoint", "tcp://127.0.0.1:*",
                          "--served-model-name", MODEL, "--speedup", "20",
                          "--etcd", etcd.endpoint, "--etcd-name", name,
                          "--etcd-ttl", str(ttl), *extra], SIM_READY)
        self.ready_at = time.time()
        self.port = int(self.proc.match.group(2))


class EtcdServe:
    def __init__(self, binary, etcd, workdir, static_yaml=""):
        cfg = ("listen: {host: 127.0.0.1, port: 0}\nscrape_interval_s: 0.2\n"
               "health_interval_s: 0.3\nshutdown_grace_s: 0\n" + static_yaml)
        path = os.path.join(workdir, "serve.yaml")
        with open(path, "w") as f:
            f.write(cfg)
        self.proc = Proc([binary, "serve", "--config", path, "--etcd", etcd.endpoint,
                          "--log-level", "info"], SERVE_READY)
        self.port = int(self.proc.match.group(2))

    def metrics(self):
        return parse_prom(get(self.port, "/metrics")[2])

    def workers(self):
        return {l["worker"] for l, v in self.metrics().get("kvroute_worker_healthy", [])}


def one_request(port, i, max_tokens=40, timeout=30):
    """A streamed chat completion: (status, worker, error text or None, token chunks)."""
    body = {"model": MODEL, "stream": True, "max_tokens": max_tokens, "ignore_eos": True,
            "messages": [{"role": "user", "content": "request %d of the load loop" % i}]}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", "/v1/chat/completions", body=json.dumps(body),
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        text = r.read().decode(errors="replace")
        worker = r.getheader("x-kvroute-worker") or ""
        if r.status != 200:
            return r.status, worker, text[:200], 0
        events = [l[6:] for l in text.split("\n") if l.startswith("data: ")]
        if not events or events[-1] != "[DONE]":
            return r.status, worker, "stream did not end with [DONE]", 0
        chunks = 0
        for e in events[:-1]:
            obj = json.loads(e)
            if "error" in obj:
                return r.status, worker, json.dumps(obj["error"])[:200], chunks
            if obj.get("choices") and obj["choices"][0]["delta"].get("content"):
                chunks += 1
        return r.status, worker, None, chunks
    except (OSError, http.client.HTTPException, ValueError) as e:
        return 0, "", repr(e), 0
    finally:
        conn.close()


class Load:
    """`threads` client loops until stop() or `max_requests` or `max_seconds`."""

    def __init__(self, port, threads=3, max_requests=20000, max_seconds=110):
        self.port = port
        self.results = []  # (t_start, t_end, status, worker, error)
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.count = 0
        self.max_requests = max_requests
        self.deadline = time.time() + max_seconds
        self.threads = [threading.Thread(target=self.loop, daemon=True) for _ in range(threads)]
        for t in self.threads:
            t.start()

    def loop(self):
        while not self.stopping.is_set() and time.time() < self.deadline:
            with self.lock:
                if self.count >= self.max_requests:
                    return
                i = self.count
                self.count += 1
            t0 = time.time()
            status, worker, error, _ = one_request(self.port, i)
            with self.lock:
                self.results.append((t0, time.time(), status, worker, error))

    def stop(self):
        self.stopping.set()
        for t in self.threads:
            t.join(timeout=40)
        return list(self.results)

    def snapshot(self):
        with self.lock:
            return list(self.results)


def failures(results):
    return [r for r in results if r[4] is not None]


def wait_until(pred, timeout, step=0.05):
    """The first truthy value pred() returns within timeout, else its last value."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(step)
    return pred()

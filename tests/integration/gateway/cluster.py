"""A loopback cluster for the gateway's integration tests: N `kvroute sim` processes and one
`kvroute serve` in front, each on an OS-chosen port read from its ready line. Every wait is
bounded; processes are stopped by their own pid only (never by name).

Uses only the standard library (Debian's /usr/bin/python3)."""

import http.client
import json
import os
import re
import select
import signal
import subprocess
import tempfile
import time

SIM_READY = re.compile(rb"listening on http://([^\s:]+):(\d+) model=(\S+) kv_events=(\S+)")
SERVE_READY = re.compile(rb"kvroute serve listening on http://([^\s]+):(\d+)")


class Proc:
    """A child process with its ready-line match and captured stderr (in a temp file)."""

    def __init__(self, args, ready_re, timeout=30):
        self.err = tempfile.TemporaryFile()
        self.p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=self.err)
        self.match = None
        deadline = time.time() + timeout
        buf = b""
        while time.time() < deadline:
            r, _, _ = select.select([self.p.stdout], [], [], 0.2)
            if r:
                chunk = os.read(self.p.stdout.fileno(), 4096)
                if not chunk:
                    break
                buf += chunk
                m = ready_re.search(buf)
                if m:
                    self.match = m
                    return
            elif self.p.poll() is not None:
                break
        self.kill()
        raise RuntimeError("not ready: %r\n%s" % (args, self.stderr()))

    def stderr(self):
        self.err.seek(0)
        return self.err.read().decode(errors="replace")

    def signal(self, sig):
        if self.p.poll() is None:
            os.kill(self.p.pid, sig)

    def wait(self, timeout):
        try:
            return self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def kill(self):
        if self.p.poll() is None:
            os.kill(self.p.pid, signal.SIGKILL)
            self.p.wait(timeout=10)


class Sim:
    def __init__(self, binary, name, extra=()):
        self.name = name
        self.proc = Proc([binary, "sim", "--host", "127.0.0.1", "--port", "0",
                          "--kv-events-endpoint", "tcp://127.0.0.1:*",
                          "--served-model-name", "sim-model", *extra], SIM_READY)
        self.port = int(self.proc.match.group(2))
        self.model = self.proc.match.group(3).decode()
        self.kv_endpoint = self.proc.match.group(4).decode()
        self.url = "http://127.0.0.1:%d" % self.port

    def worker_yaml(self, models=()):
        # The sim binds its PUB socket (as vLLM does with tcp://*:PORT); the gateway connects
        # to the worker's host on that port. `models`: served names besides the sim's model
        # (LoRA adapters of --lora-modules).
        kv_port = self.kv_endpoint.rsplit(":", 1)[1]
        names = ", ".join([self.model, *models])
        return ("  - name: %s\n    url: %s\n    models: [%s]\n    kv_events:\n"
                "      endpoint: \"tcp://*:%s\"\n" % (self.name, self.url, names, kv_port))

    def metrics(self):
        return parse_prom(get(self.port, "/metrics")[2])


class Cluster:
    """`n` sims plus kvroute serve. Use as a context manager."""

    def __init__(self, binary, n=3, speedup=20, extra_yaml="", sim_extra=(), serve_args=(),
                 worker_models=(), sim_models=None):
        # sim_models: per sim, LoRA adapter names it serves besides its model (--lora-modules,
        # and the worker's models), for tests where only some workers serve a model.
        self.binary = binary
        self.dir = tempfile.TemporaryDirectory()
        self.sims = []
        self.serve = None
        try:
            own = [list(sim_models[i]) if sim_models else [] for i in range(n)]
            for i in range(n):
                lora = [a for name in own[i] for a in ("--lora-modules", name)]
                self.sims.append(Sim(binary, "w%d" % i,
                                     ["--speedup", str(speedup), *sim_extra, *lora]))
            cfg = "listen: {host: 127.0.0.1, port: 0}\nworkers:\n"
            cfg += "".join(s.worker_yaml([*worker_models, *own[i]]) for i, s in enumerate(self.sims))
            cfg += "scrape_interval_s: 0.2\nhealth_interval_s: 0.3\n" + extra_yaml
            self.config_path = os.path.join(self.dir.name, "serve.yaml")
            with open(self.config_path, "w") as f:
                f.write(cfg)
            self.serve = Proc([binary, "serve", "--config", self.config_path, "--log-level",
                               "warn", *serve_args], SERVE_READY)
            self.port = int(self.serve.match.group(2))
        except Exception:
            self.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self.serve:
            self.serve.kill()
        for s in self.sims:
            s.proc.kill()
        self.dir.cleanup()

    def sim(self, name):
        return next(s for s in self.sims if s.name == name)


def request(port, method, path, body=None, headers=None, timeout=60):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        hdrs = {"Content-Type": "application/json"}
        hdrs.update(headers or {})
        data = body if isinstance(body, (bytes, type(None))) else (
            body.encode() if isinstance(body, str) else json.dumps(body).encode())
        conn.request(method, path, body=data, headers=hdrs)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode(errors="replace")
    finally:
        conn.close()


def get(port, path, timeout=30):
    return request(port, "GET", path, timeout=timeout)


def post(port, path, body, headers=None, timeout=60):
    return request(port, "POST", path, body, headers, timeout)


def stream_events(port, path, body, timeout=60):
    """POSTs a streaming request; returns (status, headers, [data payloads], raw text)."""
    status, headers, text = post(port, path, body, timeout=timeout)
    events = [line[len("data: "):] for line in text.split("\n") if line.startswith("data: ")]
    return status, headers, events, text


def parse_prom(text):
    """{name: [(labels dict, value)]} from Prometheus text."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)', line)
        if not m:
            continue
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        try:
            value = float(m.group(4))
        except ValueError:
            continue
        out.setdefault(m.group(1), []).append((labels, value))
    return out


def metric_sum(metrics, name, **labels):
    total = 0.0
    for l, v in metrics.get(name, []):
        if all(l.get(k) == want for k, want in labels.items()):
            total += v
    return total


class Cases:
    """Runs named cases in order, prints one line each, exits 1 on any failure."""

    def __init__(self):
        self.failed = 0

    def run(self, name, fn):
        try:
            fn()
            print("ok   " + name, flush=True)
        except Exception as e:  # noqa: BLE001 - report and continue with the next case
            import traceback
            self.failed += 1
            print("FAIL %s: %s" % (name, e), flush=True)
            traceback.print_exc()

    def exit(self):
        raise SystemExit(1 if self.failed else 0)


def check(cond, message):
    if not cond:
        raise AssertionError(message)


def wait_until(fn, timeout, interval=0.1):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(interval)
    return fn()

"""Several `kvroute serve` replicas in front of the same sims, behind nginx round robin: the
loopback setup of the replica tests and of scripts/replicas/ (the benchmark). Each replica is
configured with every sim (so each subscribes to every engine's KV events and holds the full
index) and listens on a port chosen once, so a restarted replica comes back where nginx
expects it. nginx is configured as `kvroute bench compare` configures its baseline
(src/bench/nginx.cc: keep-alive upstreams, no buffering, one process we stop by pid), with
round robin over the replicas instead of the sims. Processes are stopped by their own pid."""

import http.client
import os
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "gateway"))
from cluster import Proc, SERVE_READY, Sim, get  # noqa: E402

NGINX = "/usr/sbin/nginx"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


class Replica:
    """One `kvroute serve` on a fixed port; start() again after a kill restarts it."""

    def __init__(self, binary, name, port, sims, workdir, extra_yaml="", log_level="warn",
                 warm_from=(), replicas_yaml=""):
        self.binary, self.name, self.log_level, self.port = binary, name, log_level, port
        self.url = "http://127.0.0.1:%d" % port
        self.config_path = os.path.join(workdir, "%s.yaml" % name)
        cfg = "listen: {host: 127.0.0.1, port: %d}\nworkers:\n" % self.port
        cfg += "".join(s.worker_yaml() for s in sims)
        cfg += "scrape_interval_s: 0.2\nhealth_interval_s: 0.3\nshutdown_grace_s: 0\n"
        if warm_from:
            cfg += "replicas: {warm_from: [%s]%s}\n" % (", ".join(warm_from), replicas_yaml)
        with open(self.config_path, "w") as f:
            f.write(cfg + extra_yaml)
        self.proc = None
        self.ready_at = None

    def start(self):
        self.proc = Proc([self.binary, "serve", "--config", self.config_path, "--log-level",
                          self.log_level], SERVE_READY)
        self.ready_at = time.time()
        return self

    def kill(self):
        if self.proc:
            self.proc.kill()

    def route(self, body):
        """The replica's decision for `body` (POST /debug/route): the chosen worker or None."""
        import json
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request("POST", "/debug/route", body=json.dumps(body),
                         headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            text = r.read()
            if r.status != 200:
                return None
            return json.loads(text).get("chosen")
        except (OSError, http.client.HTTPException, ValueError):
            return None
        finally:
            conn.close()


class Nginx:
    """nginx round robin over `ports` on 127.0.0.1:`port`."""

    def __init__(self, ports, workdir):
        self.dir = os.path.join(workdir, "nginx")
        os.makedirs(self.dir, exist_ok=True)
        self.port = free_port()
        servers = "".join("    server 127.0.0.1:%d max_fails=0;\n" % p for p in ports)
        d = self.dir
        conf = ("daemon off;\nmaster_process off;\nworker_processes 1;\npid %s/nginx.pid;\n"
                "error_log %s/error.log warn;\nevents { worker_connections 4096; }\nhttp {\n"
                "  access_log off;\n  client_body_temp_path %s/client_body;\n"
                "  proxy_temp_path %s/proxy;\n  fastcgi_temp_path %s/fastcgi;\n"
                "  uwsgi_temp_path %s/uwsgi;\n  scgi_temp_path %s/scgi;\n"
                "  client_max_body_size 64m;\n  upstream replicas {\n%s    keepalive 64;\n  }\n"
                "  server {\n    listen 127.0.0.1:%d;\n    location / {\n"
                "      proxy_pass http://replicas;\n      proxy_http_version 1.1;\n"
                "      proxy_set_header Connection \"\";\n      proxy_buffering off;\n"
                "      proxy_request_buffering off;\n      proxy_read_timeout 600s;\n"
                "      proxy_send_timeout 600s;\n    }\n  }\n}\n"
                % (d, d, d, d, d, d, d, servers, self.port))
        path = os.path.join(d, "nginx.conf")
        with open(path, "w") as f:
            f.write(conf)
        self.log = open(os.path.join(d, "stderr.log"), "ab")
        self.p = subprocess.Popen([NGINX, "-p", d, "-c", path], stdin=subprocess.DEVNULL,
                                  stdout=self.log, stderr=self.log)
        if not wait_port(self.port, 10):
            self.stop()
            raise RuntimeError("nginx did not start: %s" % open(os.path.join(d, "error.log")).read())

    def stop(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait(timeout=10)


class ReplicaSet:
    """`sims` sims, `replicas` replicas, nginx in front. A context manager."""

    def __init__(self, binary, workdir, sims=3, replicas=2, speedup=20, sim_extra=(),
                 extra_yaml="", log_level="warn", warm=False, replicas_yaml=""):
        """`warm`: every replica lists every replica (itself too) in replicas.warm_from, so
        each also shares its bookings with the others (docs/replicas.md) unless
        `replicas_yaml` says otherwise (", share_bookings: false": more keys of replicas:)."""
        self.sims, self.replicas, self.nginx = [], [], None
        self.binary, self.workdir = binary, workdir
        try:
            for i in range(sims):
                self.sims.append(Sim(binary, "w%d" % i, ["--speedup", str(speedup), *sim_extra]))
            ports = [free_port() for _ in range(replicas)]
            urls = ["http://127.0.0.1:%d" % p for p in ports] if warm else []
            for i, port in enumerate(ports):
                self.replicas.append(Replica(binary, "r%d" % i, port, self.sims, workdir,
                                             extra_yaml, log_level, urls,
                                             replicas_yaml).start())
            self.nginx = Nginx(ports, workdir)
        except Exception:
            self.close()
            raise

    @property
    def port(self):
        return self.nginx.port

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self.nginx:
            self.nginx.stop()
        for r in self.replicas:
            r.kill()
        for s in self.sims:
            s.proc.kill()


def ready(port):
    try:
        return get(port, "/ready", timeout=2)[0] == 200
    except OSError:
        return False


def chat(port, messages, max_tokens=8, timeout=60):
    """A non-streamed chat completion: (status, worker header, reply text or error)."""
    import json
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", "/v1/chat/completions",
                     body=json.dumps({"model": "sim-model", "messages": messages,
                                      "max_tokens": max_tokens, "ignore_eos": True}),
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        text = r.read().decode(errors="replace")
        if r.status != 200:
            return r.status, r.getheader("x-kvroute-worker") or "", text[:200]
        reply = json.loads(text)["choices"][0]["message"]["content"]
        return 200, r.getheader("x-kvroute-worker") or "", reply
    except (OSError, http.client.HTTPException, ValueError, KeyError) as e:
        return 0, "", repr(e)
    finally:
        conn.close()


def conversation_start(i, tag="conversation"):
    """A conversation's first messages: a system prompt of a few dozen blocks, unique to it."""
    return [{"role": "system", "content": "%s %d: " % (tag, i) + "context words " * 120},
            {"role": "user", "content": "turn 1 of %s %d" % (tag, i)}]


def run_conversation(port, messages, turns):
    """`turns` turns through `port`, each sending the whole history: [(status, worker)]."""
    seen = []
    for t in range(turns):
        status, worker, reply = chat(port, messages)
        seen.append((status, worker))
        if status != 200:
            break
        messages.append({"role": "assistant", "content": reply})
        messages.append({"role": "user", "content": "turn %d" % (t + 2)})
    return seen


def follow_up_fraction(results):
    """Of the follow-up turns (turn k ≥ 2 whose turn k-1 succeeded), the fraction served by
    the worker that served turn k-1 — the worker holding the conversation's blocks."""
    follow, same = 0, 0
    for seen in results:
        for prev, cur in zip(seen, seen[1:]):
            if prev[0] == 200 and cur[0] == 200:
                follow += 1
                same += prev[1] == cur[1]
    return (same / follow if follow else None), follow

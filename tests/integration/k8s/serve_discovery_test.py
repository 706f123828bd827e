"""`kvroute serve` with `discovery.kubernetes` and no static workers: the fleet is the pods of
an InferencePool, followed through a local HTTP server that speaks the Kubernetes list/watch
wire format. THIS IS A FAKE: no Kubernetes API server can run on the machines this project is
tested on; its answers are shaped like tests/integration/k8s/recorded/ (hand-written in the API
server's shapes), with the one pod's IP and the pool's target port pointing at a real
`kvroute sim` on loopback. Checked, as a client sees it:
  - the pool's ready pod joins serve's fleet (named <pod>:<port>) and serves a chat request;
  - the pod turning terminating (deletionTimestamp set, in the watch) drains it at once: the
    next request is refused (503: the pool has no other endpoint), none reaches the sim;
  - the pod's deletion removes it from the fleet.

usage: serve_discovery_test.py KVROUTE"""

import http.server
import json
import os
import sys
import tempfile
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "gateway"))
from cluster import Proc, SIM_READY, SERVE_READY, get, parse_prom, post  # noqa: E402

kvroute = sys.argv[1]
MODEL = "sim-model"


def pod(port_ready, rv, terminating=False):
    meta = {"name": "vllm-a", "namespace": "llm", "uid": "uid-vllm-a", "resourceVersion": str(rv),
            "labels": {"app": "vllm-qwen", "pod-template-hash": "6d9f8b7c5"}}
    if terminating:
        meta["deletionTimestamp"] = "2026-11-30T10:00:00Z"
        meta["deletionGracePeriodSeconds"] = 75
    return {"kind": "Pod", "apiVersion": "v1", "metadata": meta,
            "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.11.0"}]},
            "status": {"phase": "Running", "podIP": "127.0.0.1", "podIPs": [{"ip": "127.0.0.1"}],
                       "conditions": [{"type": "Ready", "status": "True"}]}}


class Fake:
    def __init__(self, sim_port):
        self.sim_port = sim_port
        self.terminate = threading.Event()
        self.delete = threading.Event()
        self.watches = 0
        self.lock = threading.Lock()


def handler_for(fake):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def reply(self, status, obj):
            body = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def event(self, kind, obj):
            data = (json.dumps({"type": kind, "object": obj}) + "\n").encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        def do_GET(self):
            url = urllib.parse.urlparse(self.path)
            query = dict(urllib.parse.parse_qsl(url.query))
            if url.path == "/apis/inference.networking.k8s.io/v1/namespaces/llm/inferencepools/qwen-pool":
                return self.reply(200, {
                    "apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
                    "metadata": {"name": "qwen-pool", "namespace": "llm", "resourceVersion": "812"},
                    "spec": {"selector": {"matchLabels": {"app": "vllm-qwen"}},
                             "targetPorts": [{"number": fake.sim_port}],
                             "endpointPickerRef": {"name": "kvroute-epp", "port": {"number": 9002},
                                                   "failureMode": "FailOpen"}}})
            if url.path != "/api/v1/namespaces/llm/pods":
                return self.reply(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                        "reason": "NotFound", "code": 404})
            if query.get("watch") != "true":
                return self.reply(200, {"kind": "PodList", "apiVersion": "v1",
                                        "metadata": {"resourceVersion": "1000"},
                                        "items": [pod(True, 990)]})
            with fake.lock:
                fake.watches += 1
                first = fake.watches == 1
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            if first:
                fake.terminate.wait(60)
                self.event("MODIFIED", pod(True, 1001, terminating=True))
                fake.delete.wait(60)
                self.event("DELETED", pod(True, 1002, terminating=True))
            # Then a quiet watch until the client's timeoutSeconds (bounded here).
            time.sleep(min(5, float(query.get("timeoutSeconds", "5"))))
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    return Handler


def fleet(serve_port):
    m = parse_prom(get(serve_port, "/metrics")[2])
    healthy = {l["worker"] for l, v in m.get("kvroute_worker_healthy", [])}
    draining = {l["worker"] for l, v in m.get("kvroute_worker_draining", []) if v == 1}
    return healthy, draining


def sim_requests(sim_port):
    m = parse_prom(get(sim_port, "/metrics")[2])
    return sum(v for l, v in m.get("vllm:request_success_total", []))


def chat(serve_port, i):
    body = json.dumps({"model": MODEL, "max_tokens": 8,
                       "messages": [{"role": "user", "content": "turn %d" % i}]})
    status, headers, text = post(serve_port, "/v1/chat/completions", body,
                                 {"Content-Type": "application/json"}, timeout=30)
    return status, headers.get("x-kvroute-worker", ""), text


def wait_for(what, pred, timeout=15):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return time.time()
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


def main():
    work = tempfile.mkdtemp(prefix="kvroute-k8s-serve-")
    sim = Proc([kvroute, "sim", "--host", "127.0.0.1", "--port", "0", "--served-model-name", MODEL,
                "--speedup", "20"], SIM_READY)
    server = None
    serve = None
    try:
        sim_port = int(sim.match.group(2))
        fake = Fake(sim_port)
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler_for(fake))
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        cfg = os.path.join(work, "serve.yaml")
        with open(cfg, "w") as f:
            f.write("listen: {host: 127.0.0.1, port: 0}\nmode: approximate\n"
                    "scrape_interval_s: 0.2\nhealth_interval_s: 0.3\nshutdown_grace_s: 0\n"
                    "discovery:\n  kubernetes: {pool: qwen-pool, namespace: llm, "
                    "api_url: 'http://127.0.0.1:%d', models: [%s]}\n"
                    % (server.server_address[1], MODEL))
        started = time.time()
        serve = Proc([kvroute, "serve", "--config", cfg, "--log-level", "info"], SERVE_READY)
        port = int(serve.match.group(2))
        name = "vllm-a:%d" % sim_port

        joined = wait_for("the pod to join", lambda: name in fleet(port)[0])
        print("pod joined %.2f s after serve started" % (joined - started))
        status, worker, text = chat(port, 1)
        assert status == 200, (status, text)
        assert worker == name, worker
        served = sim_requests(sim_port)
        assert served >= 1, served

        fake.terminate.set()
        wait_for("the pod to drain", lambda: name in fleet(port)[1])
        status, worker, text = chat(port, 2)
        assert status == 503, (status, worker, text[:300])
        assert "error" in json.loads(text), text[:300]
        assert sim_requests(sim_port) == served, "a drained pod was sent a request"

        fake.delete.set()
        wait_for("the pod to leave", lambda: name not in fleet(port)[0])
        print("ok: joined, served, drained (503, nothing sent), left")
    except Exception:
        if serve:
            sys.stderr.write(serve.stderr()[-4000:])
        raise
    finally:
        if serve:
            serve.kill()
        sim.kill()
        if server:
            server.shutdown()


if __name__ == "__main__":
    main()

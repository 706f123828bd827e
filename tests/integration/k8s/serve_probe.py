"""What the k8s serve tests read from a running `kvroute serve` and `kvroute sim`: the fleet
(healthy and draining workers, from /metrics), a sim's served-request count, one chat request,
and a bounded wait. Imported by path (tests add tests/integration/k8s/ to sys.path)."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "gateway"))
from cluster import get, parse_prom, post  # noqa: E402


def fleet(serve_port):
    m = parse_prom(get(serve_port, "/metrics")[2])
    healthy = {l["worker"] for l, v in m.get("kvroute_worker_healthy", [])}
    draining = {l["worker"] for l, v in m.get("kvroute_worker_draining", []) if v == 1}
    return healthy, draining


def sim_requests(sim_port):
    m = parse_prom(get(sim_port, "/metrics")[2])
    return sum(v for l, v in m.get("vllm:request_success_total", []))


def chat(serve_port, model, i):
    body = json.dumps({"model": model, "max_tokens": 8,
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

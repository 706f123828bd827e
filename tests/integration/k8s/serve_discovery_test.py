"""`kvroute serve` with `discovery.kubernetes` and no static workers: the fleet is the pods of
an InferencePool, followed through a local HTTP server that speaks the Kubernetes list/watch
wire format (fake_api.py). THIS IS A FAKE: no Kubernetes API server can run on the machines this
project is tested on; its answers are shaped like tests/integration/k8s/recorded/ (hand-written
in the API server's shapes), with the one pod's IP and the pool's target port pointing at a
real `kvroute sim` on loopback. Checked, as a client sees it:
  - the pool's ready pod joins serve's fleet (named <pod>:<port>) and serves a chat request;
  - the pod turning terminating (deletionTimestamp set, in the watch) drains it at once: the
    next request is refused (503: the pool has no other endpoint), none reaches the sim;
  - the pod's deletion removes it from the fleet.
With `endpointslices` the same through `source: endpointslices` of Service vllm-qwen: the
endpoint ready in its slice joins, turning terminating (still serving) drains it, the slice's
deletion removes it; the slice's second port (KV events) is not a worker.

usage: serve_discovery_test.py KVROUTE [endpointslices]"""

import json
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "gateway"))
sys.path.insert(0, HERE)
from cluster import Proc, SIM_READY, SERVE_READY  # noqa: E402
from fake_api import FakeApi, endpoint_slice, inference_pool, pod  # noqa: E402
from serve_probe import chat, fleet, sim_requests, wait_for  # noqa: E402

kvroute = sys.argv[1]
SLICES = len(sys.argv) > 2 and sys.argv[2] == "endpointslices"
MODEL = "sim-model"
LABELS = {"app": "vllm-qwen"}


def main():
    work = tempfile.mkdtemp(prefix="kvroute-k8s-serve-")
    sim = Proc([kvroute, "sim", "--host", "127.0.0.1", "--port", "0", "--served-model-name", MODEL,
                # A port of its own (not the default *:5557): these tests run side by side.
                "--kv-events-endpoint", "tcp://127.0.0.1:*", "--speedup", "20"], SIM_READY)
    api = None
    serve = None
    try:
        sim_port = int(sim.match.group(2))
        ports = [("http", sim_port), ("kv-events", 5557)]

        def slice_with(rv, ready, terminating):
            return endpoint_slice("vllm-qwen-7xk2p", "vllm-qwen", rv,
                                  [("vllm-a", "127.0.0.1", ready, True, terminating)], ports)
        api = FakeApi("llm", inference_pool("qwen-pool", "llm", LABELS, sim_port),
                      [pod("vllm-a", "127.0.0.1", 990, LABELS)],
                      slices=[slice_with(990, True, False)] if SLICES else None)
        cfg = os.path.join(work, "serve.yaml")
        with open(cfg, "w") as f:
            f.write("listen: {host: 127.0.0.1, port: 0}\nmode: approximate\n"
                    "scrape_interval_s: 0.2\nhealth_interval_s: 0.3\nshutdown_grace_s: 0\n"
                    "discovery:\n  kubernetes: {pool: qwen-pool, namespace: llm, "
                    "api_url: '%s', models: [%s]%s}\n"
                    % (api.url, MODEL, ", source: endpointslices, service: vllm-qwen" if SLICES else ""))
        started = time.time()
        serve = Proc([kvroute, "serve", "--config", cfg, "--log-level", "info"], SERVE_READY)
        port = int(serve.match.group(2))
        name = "vllm-a:%d" % sim_port

        joined = wait_for("the pod to join", lambda: name in fleet(port)[0])
        print("pod joined %.2f s after serve started" % (joined - started))
        assert fleet(port)[0] == {name}, fleet(port)[0]  # one worker: the pool's port only
        status, worker, text = chat(port, MODEL, 1)
        assert status == 200, (status, text)
        assert worker == name, worker
        served = sim_requests(sim_port)
        assert served >= 1, served

        if SLICES:
            api.push("MODIFIED", slice_with(1001, False, True))
        else:
            api.push("MODIFIED", pod("vllm-a", "127.0.0.1", 1001, LABELS, terminating=True))
        wait_for("the pod to drain", lambda: name in fleet(port)[1])
        status, worker, text = chat(port, MODEL, 2)
        assert status == 503, (status, worker, text[:300])
        assert "error" in json.loads(text), text[:300]
        assert sim_requests(sim_port) == served, "a drained pod was sent a request"

        if SLICES:
            api.push("DELETED", slice_with(1002, False, True))
        else:
            api.push("DELETED", pod("vllm-a", "127.0.0.1", 1002, LABELS, terminating=True))
        wait_for("the pod to leave", lambda: name not in fleet(port)[0])
        print("ok: joined, served, drained (503, nothing sent), left%s" % (" (EndpointSlices)" if SLICES else ""))
    except Exception:
        if serve:
            sys.stderr.write(serve.stderr()[-4000:])
        raise
    finally:
        if serve:
            serve.kill()
        sim.kill()
        if api:
            api.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

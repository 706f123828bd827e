"""Precise mode for pods found through Kubernetes: `kvroute serve` reads where each discovered
pod's engine publishes KV events from the Pod object and subscribes to it. THE API SERVER IS A
FAKE (fake_api.py: recorded-shape answers; no Kubernetes API server can run on the machines this
project is tested on); its three pods are three real `kvroute sim`s with KV events, on
127.0.0.1, .2 and .3 (one port: the pool's target port):
  - vllm-a says where in the annotation kvroute.io/kv-events-port;
  - vllm-b in vLLM's own --kv-events-config JSON among its container args;
  - vllm-c says nothing (its sim publishes anyway): the control.
Each sim is sent one completion DIRECTLY (not through kvroute, so kvroute's own routing history
predicts nothing). Then, through kvroute: the event lag gauge exists for a and b and not for c,
and /debug/route for a's and b's prompts picks that worker with cached blocks in the gpu tier —
blocks only the engines' events can have told it — while c's prompt shows none cached.

With `endpointslices` the same pods are found through the EndpointSlice of Service vllm-qwen
(source: endpointslices): a slice carries no pod spec, so kvroute GETs each endpoint's
targetRef pod from the (fake) API and reads the same annotation / args there.

usage: serve_kv_events_test.py KVROUTE [endpointslices]"""

import http.client
import json
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "gateway"))
sys.path.insert(0, HERE)
from cluster import Proc, SIM_READY, SERVE_READY, get, parse_prom, post  # noqa: E402
from fake_api import FakeApi, endpoint_slice, inference_pool, pod  # noqa: E402
from serve_probe import fleet, wait_for  # noqa: E402

kvroute = sys.argv[1]
SLICES = len(sys.argv) > 2 and sys.argv[2] == "endpointslices"
MODEL = "sim-model"
LABELS = {"app": "vllm-qwen"}
HOSTS = {"vllm-a": "127.0.0.1", "vllm-b": "127.0.0.2", "vllm-c": "127.0.0.3"}
PROMPTS = {name: (name + " holds this prefix. ") * 40 for name in HOSTS}


def start_sim(host, port):
    return Proc([kvroute, "sim", "--host", host, "--port", str(port), "--served-model-name", MODEL,
                 "--kv-events-endpoint", "tcp://%s:*" % host, "--speedup", "20"], SIM_READY)


def lagging_workers(serve_port):
    m = parse_prom(get(serve_port, "/metrics")[2])
    return {l.get("worker") for l, v in m.get("kvroute_kv_event_lag_seconds", [])}


def complete_directly(host, port, prompt):
    conn = http.client.HTTPConnection(host, port, timeout=30)
    try:
        conn.request("POST", "/v1/completions", json.dumps({"model": MODEL, "prompt": prompt, "max_tokens": 4}),
                     {"Content-Type": "application/json"})
        r = conn.getresponse()
        return r.status, r.read().decode()
    finally:
        conn.close()


def route(serve_port, prompt):
    status, _, body = post(serve_port, "/debug/route", json.dumps(
        {"model": MODEL, "prompt": prompt, "max_tokens": 4}), {"Content-Type": "application/json"})
    assert status == 200, (status, body[:300])
    return json.loads(body)


def main():
    work = tempfile.mkdtemp(prefix="kvroute-k8s-kv-")
    sims, api, serve = {}, None, None
    try:
        sims["vllm-a"] = start_sim(HOSTS["vllm-a"], 0)
        port = int(sims["vllm-a"].match.group(2))
        for name in ("vllm-b", "vllm-c"):
            sims[name] = start_sim(HOSTS[name], port)
        kv_port = {n: int(s.match.group(4).decode().rsplit(":", 1)[1]) for n, s in sims.items()}
        vllm_args = ["--model=Qwen/Qwen3-8B", "--port=%d" % port,
                     "--kv-events-config=" + json.dumps({"enable_kv_cache_events": True, "publisher": "zmq",
                                                         "endpoint": "tcp://*:%d" % kv_port["vllm-b"],
                                                         "topic": ""})]
        pods = [
            pod("vllm-a", HOSTS["vllm-a"], 990, LABELS,
                annotations={"kvroute.io/kv-events-port": str(kv_port["vllm-a"])}),
            pod("vllm-b", HOSTS["vllm-b"], 991, LABELS,
                containers=[{"name": "vllm", "image": "vllm/vllm-openai:v0.11.0", "args": vllm_args}]),
            pod("vllm-c", HOSTS["vllm-c"], 992, LABELS),
        ]
        slices = None
        if SLICES:
            slices = [endpoint_slice("vllm-qwen-7xk2p", "vllm-qwen", 993,
                                     [(n, HOSTS[n], True, True, False) for n in HOSTS], [("http", port)])]
        api = FakeApi("llm", inference_pool("qwen-pool", "llm", LABELS, port), pods, slices=slices)
        cfg = os.path.join(work, "serve.yaml")
        with open(cfg, "w") as f:
            f.write("listen: {host: 127.0.0.1, port: 0}\nmode: precise\n"
                    "scrape_interval_s: 0.2\nhealth_interval_s: 0.3\nshutdown_grace_s: 0\n"
                    "discovery:\n  kubernetes: {pool: qwen-pool, namespace: llm, "
                    "api_url: '%s', models: [%s]%s}\n"
                    % (api.url, MODEL, ", source: endpointslices, service: vllm-qwen" if SLICES else ""))
        serve = Proc([kvroute, "serve", "--config", cfg, "--log-level", "info"], SERVE_READY)
        serve_port = int(serve.match.group(2))
        workers = {n: "%s:%d" % (n, port) for n in HOSTS}
        wait_for("the three pods to join", lambda: set(workers.values()) <= fleet(serve_port)[0])

        for name, sim in sims.items():  # straight to the engine: kvroute predicts nothing
            status, text = complete_directly(HOSTS[name], int(sim.match.group(2)), PROMPTS[name])
            assert status == 200, (name, status, text[:300])

        wait_for("events from vllm-a and vllm-b",
                 lambda: {workers["vllm-a"], workers["vllm-b"]} <= lagging_workers(serve_port))
        time.sleep(1.0)  # vllm-c's sim published too; nothing may have subscribed to it
        lagging = lagging_workers(serve_port)
        assert workers["vllm-c"] not in lagging, lagging
        print("ok: events arrive from the annotated pod and the --kv-events-config pod, not the other: %s"
              % sorted(lagging))

        for name in ("vllm-a", "vllm-b"):
            d = route(serve_port, PROMPTS[name])
            gpu = d["cached_blocks_by_tier"][0] if d["cached_blocks_by_tier"] else 0
            assert d["chosen"] == workers[name] and gpu > 0, (name, d["chosen"], d["cached_blocks_by_tier"])
            print("ok: /debug/route for %s's prompt picks %s, %d blocks cached (gpu), known only from its events"
                  % (name, d["chosen"], gpu))
        d = route(serve_port, PROMPTS["vllm-c"])
        c = next(x for x in d["candidates"] if x["worker"] == workers["vllm-c"])
        assert c.get("cached_any_blocks", 0) == 0, c
        print("ok: vllm-c's prompt shows no cached blocks on vllm-c (no events subscribed)")
        if SLICES:
            got = {p.rsplit("/", 1)[1] for p, _, _ in api.seen() if p.startswith("/api/v1/namespaces/llm/pods/")}
            assert got == set(HOSTS), got
            print("ok: each slice endpoint's targetRef pod was read for its KV events: %s" % sorted(got))
    except Exception:
        if serve:
            sys.stderr.write(serve.stderr()[-4000:])
        raise
    finally:
        if serve:
            serve.kill()
        for s in sims.values():
            s.kill()
        if api:
            api.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

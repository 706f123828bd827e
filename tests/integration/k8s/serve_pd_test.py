"""A prefill/decode pool found through Kubernetes serves the two-leg path, from its pods'
kvroute.io/* annotations (src/k8s/pod_pd.h). THE API SERVER IS A FAKE (fake_api.py:
recorded-shape answers; no Kubernetes API server can run on the machines this project is tested
on); its pods are real `kvroute sim`s speaking vLLM's NixlConnector protocol on 127.0.0.1, .2
and .3 (one port: the pool's target port):
  - vllm-p   no annotation: vLLM's own args say it (--tensor-parallel-size 2, --kv-transfer-config
             with kv_role kv_producer)
  - vllm-d0  kvroute.io/role: decode, kvroute.io/link: roce-100g (a link of the profile)
  - vllm-d1  kvroute.io/role: decode, kvroute.io/link-bytes-per-s: "1e9" (the first link's
             latency, this bandwidth)
  - vllm-x   kvroute.io/role: both (malformed; no sim behind it): never joined, named in the log
Checked: the fleet is exactly p, d0, d1; /admin/workers holds their roles, TP and links as
annotated; /debug/route shows a split p -> d0/d1; a chat completion is served in two legs
(X-Kvroute-Prefill-Worker names p, the decode sim pulled the KV).

usage: serve_pd_test.py KVROUTE"""

import http.client
import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "gateway"))
sys.path.insert(0, HERE)
from cluster import Proc, SIM_READY, SERVE_READY, get, metric_sum, parse_prom, post  # noqa: E402
from fake_api import FakeApi, inference_pool, pod  # noqa: E402
from serve_probe import fleet, wait_for  # noqa: E402

kvroute = sys.argv[1]
MODEL = "sim-model"
LABELS = {"app": "vllm-qwen"}
HOSTS = {"vllm-p": "127.0.0.1", "vllm-d0": "127.0.0.2", "vllm-d1": "127.0.0.3"}
ROLES = {"vllm-p": "kv_producer", "vllm-d0": "kv_consumer", "vllm-d1": "kv_consumer"}
ANNOTATIONS = {
    "vllm-p": None,
    "vllm-d0": {"kvroute.io/role": "decode", "kvroute.io/link": "roce-100g"},
    "vllm-d1": {"kvroute.io/role": "decode", "kvroute.io/link-bytes-per-s": "1e9"},
}


def start_sim(name, port):
    host = HOSTS[name]
    return Proc([kvroute, "sim", "--host", host, "--port", str(port), "--served-model-name", MODEL,
                 "--kv-events-endpoint", "tcp://%s:*" % host, "--speedup", "20",
                 "--kv-transfer-config",
                 json.dumps({"kv_connector": "NixlConnector", "kv_role": ROLES[name]}),
                 "--kv-side-channel-host", host, "--kv-side-channel-port", "0"], SIM_READY)


def sim_metrics(host, port):
    conn = http.client.HTTPConnection(host, port, timeout=10)
    try:
        conn.request("GET", "/metrics")
        return parse_prom(conn.getresponse().read().decode())
    finally:
        conn.close()


def main():
    work = tempfile.mkdtemp(prefix="kvroute-k8s-pd-")
    sims, api, serve = {}, None, None
    try:
        sims["vllm-p"] = start_sim("vllm-p", 0)
        port = int(sims["vllm-p"].match.group(2))
        for name in ("vllm-d0", "vllm-d1"):
            sims[name] = start_sim(name, port)
        vllm_p_args = ["--model=Qwen/Qwen3-32B", "--port=%d" % port, "--tensor-parallel-size", "2",
                       "--kv-transfer-config",
                       json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_producer"})]
        pods = [pod(n, HOSTS[n], 990 + i, LABELS, annotations=ANNOTATIONS[n],
                    containers=[{"name": "vllm", "image": "vllm/vllm-openai:v0.11.0",
                                 "args": vllm_p_args}] if n == "vllm-p" else None)
                for i, n in enumerate(HOSTS)]
        pods.append(pod("vllm-x", "127.0.0.4", 995, LABELS, annotations={"kvroute.io/role": "both"}))
        api = FakeApi("llm", inference_pool("qwen-pool", "llm", LABELS, port), pods)
        cfg = os.path.join(work, "serve.yaml")
        with open(cfg, "w") as f:
            # Split every request its decode worker would prefill anything of (Dynamo's rule,
            # cap 0): the test is about discovery, not about when splitting pays.
            f.write("listen: {host: 127.0.0.1, port: 0}\nmode: approximate\n"
                    "scrape_interval_s: 0.2\nhealth_interval_s: 0.3\nshutdown_grace_s: 0\n"
                    "pd: {rule: dynamo_token_cap, token_cap: 0}\n"
                    "discovery:\n  kubernetes: {pool: qwen-pool, namespace: llm, "
                    "api_url: '%s', models: [%s]}\n" % (api.url, MODEL))
        serve = Proc([kvroute, "serve", "--config", cfg, "--log-level", "info"], SERVE_READY)
        serve_port = int(serve.match.group(2))
        w = {n: "%s:%d" % (n, port) for n in list(HOSTS) + ["vllm-x"]}
        good = {w[n] for n in HOSTS}
        wait_for("the three annotated pods to join", lambda: good <= fleet(serve_port)[0])
        wait_for("vllm-x to be named in the log",
                 lambda: "worker %s not joined: kvroute.io/role: 'both'" % w["vllm-x"] in serve.stderr())
        assert fleet(serve_port)[0] == good, fleet(serve_port)[0]
        print("ok: p, d0, d1 joined; vllm-x (kvroute.io/role: both) kept out and named")

        held = {x["name"]: x for x in json.loads(get(serve_port, "/admin/workers")[2])["workers"]}
        p, d0, d1 = held[w["vllm-p"]], held[w["vllm-d0"]], held[w["vllm-d1"]]
        assert p["role"] == "prefill" and p["tp"] == 2, p
        assert d0["role"] == "decode" and d1["role"] == "decode", (d0, d1)
        assert d0["kv_link"]["name"] == "roce-100g" and d0["kv_link"]["seed_lane_bytes_per_s"] == 12e9, d0
        assert d1["kv_link"]["seed_lane_bytes_per_s"] == 1e9, d1
        print("ok: p prefill TP2 from vLLM's args; d0, d1 decode as annotated: d0 over roce-100g "
              "(12 GB/s per lane), d1 at 1 GB/s per lane")

        body = {"model": MODEL, "max_tokens": 8,
                "messages": [{"role": "user", "content": "annotated " * 200}]}
        status, _, text = post(serve_port, "/debug/route", body)
        assert status == 200, text[:300]
        pd = json.loads(text).get("pd")
        assert pd and pd["split"] and pd["prefill_worker"] == w["vllm-p"], text[:600]
        assert pd["decode_worker"] in (w["vllm-d0"], w["vllm-d1"]), pd
        print("ok: /debug/route splits %s -> %s over the discovered pool"
              % (pd["prefill_worker"], pd["decode_worker"]))

        status, headers, text = post(serve_port, "/v1/chat/completions", body)
        assert status == 200, text[:300]
        assert headers.get("x-kvroute-prefill-worker") == w["vllm-p"], headers
        decode = headers.get("x-kvroute-worker")
        name = next(n for n in HOSTS if w[n] == decode and n != "vllm-p")
        m = parse_prom(get(serve_port, "/metrics")[2])
        assert metric_sum(m, "kvroute_pd_requests_total", placement="split") == 1, \
            m.get("kvroute_pd_requests_total")
        pulls = metric_sum(sim_metrics(HOSTS[name], port), "vllm:nixl_xfer_time_seconds_count")
        assert pulls >= 1, "%s pulled nothing" % name
        print("ok: a chat completion served in two legs: prefill on %s, decode on %s"
              % (w["vllm-p"], decode))
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

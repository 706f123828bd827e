"""Envoy end to end: a real Envoy, configured from deploy/ (the `envoy.yaml` of the ConfigMap in
deploy/overlays/epp/envoy.yaml, with only its addresses rewritten for loopback), in front of
`kvroute serve --epp` and two `kvroute sim` processes. A multi-turn chat sent to Envoy must be
answered, and every follow-up turn served by the sim that served the first (the sims' own
request counters say which).

Envoy cannot be installed on the machines this project is built on: there the test checks that
the config it would load is extracted and rewritten (the ext_proc filter, FULL_DUPLEX_STREAMED
bodies, the ORIGINAL_DST cluster on x-gateway-destination-endpoint, the picker's gRPC health
check), then exits 77, which ctest reports as SKIPPED with the message below. Where `envoy` is
on PATH it runs.

usage: envoy_e2e_test.py KVROUTE_BINARY SOURCE_DIR"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import yaml

binary, src = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(src, "tests/integration/gateway"))
from cluster import Cluster, metric_sum, parse_prom, post  # noqa: E402


def envoy_config(epp_port, listen_port):
    with open(os.path.join(src, "deploy/overlays/epp/envoy.yaml")) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    cm = next(d for d in docs if d.get("kind") == "ConfigMap" and d["metadata"]["name"] == "envoy")
    cfg = yaml.safe_load(cm["data"]["envoy.yaml"])
    listener = cfg["static_resources"]["listeners"][0]
    listener["address"]["socket_address"] = {"address": "127.0.0.1", "port_value": listen_port}
    epp = next(c for c in cfg["static_resources"]["clusters"] if c["name"] == "kvroute_epp")
    epp["type"] = "STATIC"
    epp["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]["socket_address"] = {
        "address": "127.0.0.1", "port_value": epp_port}
    return cfg


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


cfg = envoy_config(9002, 8081)
http_filters = cfg["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]["http_filters"]
ext = next(f for f in http_filters if f["name"] == "envoy.filters.http.ext_proc")["typed_config"]
mode = ext["processing_mode"]
dst = next(c for c in cfg["static_resources"]["clusters"] if c["name"] == "original_destination")
epp = next(c for c in cfg["static_resources"]["clusters"] if c["name"] == "kvroute_epp")
assert mode["request_body_mode"] == "FULL_DUPLEX_STREAMED" and mode["response_body_mode"] == "FULL_DUPLEX_STREAMED", mode
assert dst["type"] == "ORIGINAL_DST" and dst["original_dst_lb_config"]["http_header_name"] == "x-gateway-destination-endpoint", dst
assert epp["health_checks"][0]["grpc_health_check"]["service_name"] == "envoy.service.ext_proc.v3.ExternalProcessor", epp
print("ok   deploy/overlays/epp/envoy.yaml: extracted and rewritten for loopback", flush=True)

envoy = shutil.which("envoy")
if not envoy:
    print("SKIPPED: no `envoy` on PATH — Envoy cannot be installed on these machines; this test runs "
          "where it is (it loads deploy/overlays/epp/envoy.yaml)", flush=True)
    sys.exit(77)

failures = 0


def check(name, cond, detail=""):
    global failures
    print(("ok   " if cond else "FAIL ") + name + ("" if cond else " " + str(detail)), flush=True)
    if not cond:
        failures += 1


with Cluster(binary, n=2, speedup=50, serve_args=["--epp", "127.0.0.1:0"]) as c:
    import re
    epp_port = int(re.search(rb"epp listening on \S+:(\d+)", c.serve.match.string).group(1))
    listen = free_port()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "envoy.yaml")
        with open(path, "w") as f:
            yaml.safe_dump(envoy_config(epp_port, listen), f)
        log = open(os.path.join(d, "envoy.log"), "w+")
        e = subprocess.Popen([envoy, "-c", path, "--base-id", str(os.getpid() % 60000), "-l", "warn"],
                             stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.time() + 30
            up = False
            while time.time() < deadline and not up:
                try:
                    socket.create_connection(("127.0.0.1", listen), timeout=1).close()
                    up = True
                except OSError:
                    time.sleep(0.2)
            check("envoy listening", up)
            served = []
            messages = [{"role": "system", "content": "An Envoy-routed chat. " * 40}]
            for t in range(3):
                before = [metric_sum(s.metrics(), "vllm:request_success_total") for s in c.sims]
                messages.append({"role": "user", "content": "Turn %d through Envoy. " % t * 6})
                status, _, body = post(listen, "/v1/chat/completions",
                                       {"model": "sim-model", "max_tokens": 8, "messages": messages})
                check("turn %d answered 200 through Envoy" % t, status == 200, body[:200])
                if status != 200:
                    break
                messages.append(json.loads(body)["choices"][0]["message"])
                after = [metric_sum(s.metrics(), "vllm:request_success_total") for s in c.sims]
                served.append([s.name for s, b, a in zip(c.sims, before, after) if a > b])
            check("each turn served by exactly one sim, the same one", len(served) == 3 and
                  all(len(x) == 1 for x in served) and len({x[0] for x in served}) == 1, served)
        finally:
            e.terminate()
            try:
                e.wait(timeout=10)
            except subprocess.TimeoutExpired:
                e.kill()
            log.seek(0)
            if failures:
                print(log.read()[-4000:])
sys.exit(1 if failures else 0)

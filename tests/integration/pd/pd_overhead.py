"""The router's added latency on the two-leg (P/D) path: time to first token of a streamed
completion sent through kvroute serve (which runs the prefill leg on P, then the decode leg on
D), against the same two legs sent by hand to the same sims (vLLM's toy-proxy recipe: the
prefill leg, then the decode leg with its kv_transfer_params), interleaved one by one in the
same run. Each request has a fresh prompt (nothing cached anywhere), so both paths do the same
engine work; the difference is kvroute's (parse, tokenize, route, booking, two rewrites, two
upstream hops) plus one fewer Python request on the direct side.

Not a ctest test (a measurement; docs/bench/pd-disaggregation.md has its command and output).
Usage: /usr/bin/python3 pd_overhead.py <kvroute binary> [pairs=300] [speedup=50]
"""
import http.client
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "gateway"))
from cluster import Proc, Sim, SERVE_READY  # noqa: E402

BINARY = sys.argv[1]
PAIRS = int(sys.argv[2]) if len(sys.argv) > 2 else 300
SPEEDUP = sys.argv[3] if len(sys.argv) > 3 else "50"


def nixl(role):
    return ["--speedup", SPEEDUP,
            "--kv-transfer-config", json.dumps({"kv_connector": "NixlConnector", "kv_role": role}),
            "--kv-side-channel-host", "127.0.0.1", "--kv-side-channel-port", "0"]


def post_json(conn, body):
    conn.request("POST", "/v1/completions", body=json.dumps(body),
                 headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    data = r.read()
    if r.status != 200:
        raise RuntimeError(f"HTTP {r.status}: {data[:200]!r}")
    return json.loads(data)


def stream_ttft(conn, body, t0):
    """Sends a streamed completion; returns seconds from t0 to the first token event."""
    conn.request("POST", "/v1/completions", body=json.dumps(body),
                 headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    if r.status != 200:
        raise RuntimeError(f"HTTP {r.status}: {r.read()[:200]!r}")
    ttft = None
    while True:
        line = r.readline()  # through the chunked decoding: ends with the body
        if not line:
            break
        if ttft is None and line.startswith(b"data: {") and b'"text"' in line:
            ttft = time.perf_counter() - t0
    return ttft


def prefill_body(body):
    b = dict(body)
    b["kv_transfer_params"] = {"do_remote_decode": True, "do_remote_prefill": False,
                               "remote_engine_id": None, "remote_block_ids": None,
                               "remote_host": None, "remote_port": None}
    b["stream"] = False
    b["max_tokens"] = 1
    b.pop("stream_options", None)
    return b


def pct(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def main():
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)  # children get a null stdin
    workdir = tempfile.TemporaryDirectory()
    sims, serve = [], None
    try:
        p = Sim(BINARY, "p", nixl("kv_producer"))
        d = Sim(BINARY, "d", nixl("kv_consumer"))
        sims = [p, d]
        cfg = "listen: {host: 127.0.0.1, port: 0}\nworkers:\n"
        cfg += p.worker_yaml() + "    role: prefill\n    profile_speedup: %s\n" % SPEEDUP
        cfg += d.worker_yaml() + "    role: decode\n    profile_speedup: %s\n" % SPEEDUP
        cfg += "pd: {rule: dynamo_token_cap, token_cap: 0}\nparity_probe: false\n"
        path = os.path.join(workdir.name, "serve.yaml")
        with open(path, "w") as f:
            f.write(cfg)
        serve = Proc([BINARY, "serve", "--config", path, "--log-level", "warn"], SERVE_READY)
        sport = int(serve.match.group(2))
        via_serve, direct, prefill_legs = [], [], []
        conns = {port: http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                 for port in (sport, p.port, d.port)}
        for i in range(PAIRS + 10):  # the first 10 pairs warm connections and are dropped
            words = " ".join(f"r{i}w{j}" for j in range(120))
            body = {"model": p.model, "prompt": words, "max_tokens": 4, "ignore_eos": True,
                    "stream": True}
            t0 = time.perf_counter()
            ttft_serve = stream_ttft(conns[sport], {**body, "prompt": "s " + words}, t0)
            t0 = time.perf_counter()
            first = post_json(conns[p.port], prefill_body({**body, "prompt": "d " + words}))
            prefill_leg = time.perf_counter() - t0
            ttft_direct = stream_ttft(
                conns[d.port], {**body, "prompt": "d " + words,
                                "kv_transfer_params": first["kv_transfer_params"]}, t0)
            if i >= 10:
                via_serve.append(ttft_serve)
                direct.append(ttft_direct)
                prefill_legs.append(prefill_leg)
        out = {"pairs": PAIRS, "speedup": float(SPEEDUP)}
        for name, v in (("serve", via_serve), ("direct", direct),
                        ("direct_prefill_leg", prefill_legs)):
            for q in (0.5, 0.9, 0.99):
                out[f"{name}_p{int(q * 100)}_ms"] = round(pct(v, q) * 1e3, 3)
        for q in (0.5, 0.9, 0.99):
            out[f"added_p{int(q * 100)}_ms"] = round(
                (pct(via_serve, q) - pct(direct, q)) * 1e3, 3)
        print(json.dumps(out))
    finally:
        if serve:
            serve.kill()
        for s in sims:
            s.proc.kill()
        workdir.cleanup()


if __name__ == "__main__":
    main()

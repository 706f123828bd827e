"""P/D between two live `kvroute sim` processes on loopback, by vLLM's own recipe.

A prefill sim and a decode sim, both with vLLM's --kv-transfer-config (NixlConnector,
kv_both) and --kv-events-config. One request is sent in two legs exactly as vLLM's
tests/v1/kv_connector/nixl_integration/toy_proxy_server.py does: the prefill leg (the client's
body with do_remote_decode, max_tokens 1, stream false, stream_options removed) by hand,
then the decode leg (the client's body with the prefill answer's kv_transfer_params
verbatim) streamed by the official openai npm client. Checks: usage on both legs, the
decode sim's KV events (read with Debian's pyzmq + msgpack) store the pulled blocks, the
prefill sim's pinned blocks return to 0, the NIXL metrics count one transfer.

Usage: /usr/bin/python3 pd_two_legs.py <kvroute binary> <repo root>
"""
import json
import re
import select
import signal
import subprocess
import sys
import time
import urllib.request

import msgpack
import zmq

BINARY, ROOT = sys.argv[1], sys.argv[2]
BLOCK = 16
KV_TRANSFER = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'


def fail(msg):
    print(f"FAIL {msg}")
    raise SystemExit(1)


def start(name):
    events = json.dumps({"enable_kv_cache_events": True, "publisher": "zmq",
                         "endpoint": "tcp://127.0.0.1:*", "topic": f"kv@{name}"})
    proc = subprocess.Popen(
        [BINARY, "sim", "--host", "127.0.0.1", "--port", "0", "--speedup", "20",  # pins expire after 480 s / 20 = 24 s: ample for node to start
         "--served-model-name", "m", "--kv-transfer-config", KV_TRANSFER,
         "--kv-events-config", events, "--kv-side-channel-host", "127.0.0.1",
         "--kv-side-channel-port", "0"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ready, _, _ = select.select([proc.stdout], [], [], 20)
    if not ready:
        proc.kill()
        fail(f"{name}: no ready line in 20 s")
    line = proc.stdout.readline()
    m = re.search(r"http://[^\s]+:(\d+) model=\S+ kv_events=(\S+).* kv_engine_id=(\S+)"
                  r" kv_side_channel=(\S+)", line)
    if not m:
        proc.kill()
        fail(f"{name}: unexpected ready line {line!r}")
    return proc, int(m.group(1)), m.group(2), m.group(3), m.group(4)


def post(port, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions",
                                 data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def metric(port, name):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + "{") or line.startswith(name + " "):
                return float(line.rsplit(" ", 1)[1])
    return None


def prefill_body(client_body):
    """toy_proxy_server.py's send_request_to_service, step 1."""
    body = dict(client_body)
    body["kv_transfer_params"] = {"do_remote_decode": True, "do_remote_prefill": False,
                                  "remote_engine_id": None, "remote_block_ids": None,
                                  "remote_host": None, "remote_port": None}
    body["stream"] = False
    body["max_tokens"] = 1
    if "max_completion_tokens" in body:
        body["max_completion_tokens"] = 1
    for key in ("stream_options", "min_tokens", "min_completion_tokens"):
        body.pop(key, None)
    return body


def stop(proc, name):
    proc.send_signal(signal.SIGTERM)
    try:
        if proc.wait(timeout=15) != 0:
            fail(f"{name} exit code {proc.returncode}")
    except subprocess.TimeoutExpired:
        proc.kill()
        fail(f"{name} did not exit within 15 s of SIGTERM")


def main():
    prefill, p_port, _, p_engine, p_side = start("prefill")
    decode, d_port, d_events, _, _ = start("decode")
    ctx = zmq.Context()
    try:
        sub = ctx.socket(zmq.SUB)
        sub.setsockopt(zmq.SUBSCRIBE, b"kv@decode")
        sub.connect(d_events)
        time.sleep(0.5)  # PUB/SUB slow joiner

        prompt = list(range(2000, 2000 + 5 * BLOCK + 3))  # 5 full blocks + 3 tokens
        client_body = {"model": "m", "prompt": prompt, "max_tokens": 12, "ignore_eos": True,
                       "stream": True, "stream_options": {"include_usage": True}}

        first = post(p_port, prefill_body(client_body))
        kv = first.get("kv_transfer_params")
        if not kv or kv.get("do_remote_prefill") is not True:
            fail(f"prefill answer has no kv_transfer_params: {first}")
        if kv["remote_engine_id"] != p_engine or f"{kv['remote_host']}:{kv['remote_port']}" != p_side:
            fail(f"prefill names {kv} but it is engine {p_engine} at {p_side}")
        if len(kv["remote_block_ids"]) != 6:
            fail(f"expected 6 pinned blocks, got {kv['remote_block_ids']}")
        u1 = first["usage"]
        if u1["prompt_tokens"] != len(prompt) or u1["completion_tokens"] != 1:
            fail(f"prefill usage {u1}")
        if first["choices"][0]["finish_reason"] != "length":
            fail(f"prefill finish_reason {first['choices'][0]['finish_reason']}")
        # The gauge is published just after the answer is sent: give it a moment on a loaded
        # machine rather than read it once.
        for _ in range(100):
            if metric(p_port, "kvroute:nixl_pinned_blocks") == 6:
                break
            time.sleep(0.05)
        if metric(p_port, "kvroute:nixl_pinned_blocks") != 6:
            fail("prefill sim does not report 6 pinned blocks")
        print(f"ok   prefill leg: {u1}, 6 blocks pinned on {p_engine}")

        decode_body = dict(client_body)
        decode_body["kv_transfer_params"] = kv  # verbatim, as the toy proxy does
        out = subprocess.run(
            ["node", f"{ROOT}/tests/integration/sim/pd_decode_stream.mjs", ROOT,
             f"http://127.0.0.1:{d_port}/v1", json.dumps(decode_body)],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        if out.returncode != 0:
            fail(f"openai client failed: {out.stderr[-2000:]}")
        got = json.loads(out.stdout.strip().splitlines()[-1])
        u2 = got["usage"]
        if got["finish"] != "length" or u2["completion_tokens"] != 12:
            fail(f"decode stream {got}")
        if u2["prompt_tokens"] != len(prompt):
            fail(f"decode usage {u2}")
        if u2["prompt_tokens_details"]["cached_tokens"] != len(prompt) - 1:
            fail(f"decode cached_tokens {u2}: expected every prompt token but the last")
        print(f"ok   decode leg streamed by the openai client: {got['chunks']} chunks, {u2}")

        stored = []
        deadline = time.time() + 10
        while time.time() < deadline and len(stored) < 5 * BLOCK:
            if not sub.poll(500):
                continue
            _, _, payload = sub.recv_multipart()
            for ev in msgpack.unpackb(payload, raw=False)[1]:
                if ev["type"] == "BlockStored":
                    stored.extend(ev["token_ids"])
        if stored[: 5 * BLOCK] != prompt[: 5 * BLOCK]:
            fail(f"decode sim's BlockStored tokens {stored[:8]}... are not the pulled blocks")
        print(f"ok   decode sim's KV events store the {len(stored) // BLOCK} pulled full blocks")

        for _ in range(100):
            if metric(p_port, "kvroute:nixl_pinned_blocks") == 0:
                break
            time.sleep(0.05)
        if metric(p_port, "kvroute:nixl_pinned_blocks") != 0:
            fail("prefill sim still pins blocks after the decode leg")
        if metric(d_port, "vllm:nixl_xfer_time_seconds_count") != 1:
            fail("decode sim does not count one NIXL transfer")
        if metric(d_port, "kvroute:nixl_transferred_blocks_total") != 6:
            fail("decode sim did not pull 6 blocks")
        print("ok   pinned blocks back to 0; one transfer of 6 blocks counted")
    finally:
        ctx.destroy(linger=0)
        stop(decode, "decode")
        stop(prefill, "prefill")
    print("ok   both sims exited 0")


main()

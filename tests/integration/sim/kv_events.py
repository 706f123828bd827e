"""KV events of a live `kvroute sim`, read with independent decoders (Debian's pyzmq + msgpack).

Checks vLLM's wire format end to end: 3-frame PUB messages [topic, seq (8 B big-endian, from 0),
msgpack batch], one batch per engine step with BlockStored for the prompt's full blocks, and
the replay ROUTER ([seq, payload] per batch after the REQ-style empty delimiter, then the
FF x 8 end marker).

Usage: /usr/bin/python3 kv_events.py <kvroute binary> map|array
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

BINARY, ENCODING = sys.argv[1], sys.argv[2]
TOPIC = b"kv@127.0.0.1@m"
BLOCK = 16


def fail(msg):
    print(f"FAIL {msg}")
    raise SystemExit(1)


def start():
    proc = subprocess.Popen(
        [BINARY, "sim", "--host", "127.0.0.1", "--port", "0", "--speedup", "100",
         "--served-model-name", "m", "--kv-events-endpoint", "tcp://127.0.0.1:*",
         "--kv-events-replay-endpoint", "tcp://127.0.0.1:*", "--kv-events-topic", TOPIC.decode(),
         "--kv-events-encoding", ENCODING],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ready, _, _ = select.select([proc.stdout], [], [], 20)
    if not ready:
        proc.kill()
        fail("no ready line in 20 s")
    line = proc.stdout.readline()
    m = re.search(r"http://([^\s]+):(\d+) model=\S+ kv_events=(\S+) kv_replay=(\S+)", line)
    if not m:
        proc.kill()
        fail(f"unexpected ready line: {line!r}")
    return proc, int(m.group(2)), m.group(3), m.group(4)


def complete(port, prompt_ids):
    body = json.dumps({"model": "m", "prompt": prompt_ids, "max_tokens": 2,
                       "ignore_eos": True}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=body,
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def event_type(ev):
    return ev["type"] if isinstance(ev, dict) else ev[0]


def stored_tokens(ev):
    return ev["token_ids"] if isinstance(ev, dict) else ev[3]


def main():
    proc, port, endpoint, replay = start()
    ctx = zmq.Context()
    try:
        sub = ctx.socket(zmq.SUB)
        sub.setsockopt(zmq.SUBSCRIBE, TOPIC)
        sub.connect(endpoint)
        time.sleep(0.5)  # PUB/SUB slow joiner: nothing is published before the first request

        prompt = list(range(1000, 1000 + 4 * BLOCK + 5))  # 4 full blocks + a partial one
        complete(port, prompt)

        batches = []
        deadline = time.time() + 10
        while time.time() < deadline:
            if not sub.poll(500):
                if batches:
                    break
                continue
            frames = sub.recv_multipart()
            if len(frames) != 3:
                fail(f"expected 3 frames, got {len(frames)}")
            topic, seq, payload = frames
            if topic != TOPIC or len(seq) != 8:
                fail(f"bad topic/seq frames {topic!r} {seq!r}")
            batches.append((int.from_bytes(seq, "big"), msgpack.unpackb(payload, raw=False)))
        if not batches:
            fail("no KV event batch within 10 s")
        seqs = [s for s, _ in batches]
        if seqs[0] != 0 or seqs != list(range(len(seqs))):
            fail(f"sequence numbers must start at 0 and count up: {seqs}")
        stored = []
        for _, batch in batches:
            if not (isinstance(batch, list) and len(batch) == 3 and isinstance(batch[0], float)):
                fail(f"batch must be [ts: float, events, dp_rank]: {batch!r:.200}")
            if batch[2] != 0:
                fail(f"data_parallel_rank {batch[2]}")
            for ev in batch[1]:
                if ENCODING == "map" and not isinstance(ev, dict):
                    fail(f"map encoding sent {type(ev)}")
                if ENCODING == "array" and not isinstance(ev, list):
                    fail(f"array encoding sent {type(ev)}")
                if event_type(ev) == "BlockStored":
                    stored.extend(stored_tokens(ev))
        if stored[: 4 * BLOCK] != prompt[: 4 * BLOCK]:
            fail(f"BlockStored tokens {stored[:20]}... are not the prompt's full blocks")
        print(f"ok   {len(batches)} batch(es), seq {seqs}, {len(stored) // BLOCK} block(s) stored")

        # A DEALER with an explicit empty delimiter: the ROUTER answers with one message per
        # batch, which a REQ socket (one reply per request) would drop after the first.
        req = ctx.socket(zmq.DEALER)
        req.setsockopt(zmq.LINGER, 0)
        req.connect(replay)
        req.send_multipart([b"", (0).to_bytes(8, "big")])
        replayed = []
        deadline = time.time() + 10
        while time.time() < deadline:
            if not req.poll(2000):
                fail("replay: no answer")
            frames = req.recv_multipart()
            if len(frames) != 3 or frames[0] != b"":
                fail(f"replay: expected [b'', seq, payload], got {len(frames)} frames")
            if frames[1] == b"\xff" * 8:
                break
            replayed.append(int.from_bytes(frames[1], "big"))
        if replayed[: len(seqs)] != seqs:
            fail(f"replay from 0 returned {replayed}, published {seqs}")
        print(f"ok   replay from seq 0 returned {replayed} then the end marker")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            fail("sim did not exit within 15 s of SIGTERM")
        ctx.destroy(linger=0)
    if code != 0:
        fail(f"sim exit code {code}")
    print("ok   sim exited 0")


main()

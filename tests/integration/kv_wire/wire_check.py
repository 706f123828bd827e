#!/usr/bin/python3
"""Wire tests of kvroute's KV event publisher and subscriber against independent decoders.

Run with Debian's /usr/bin/python3 (python3-zmq, python3-msgpack). The expectations here come
from shared/reference/vllm-protocol.md §1, not from kvroute's code.

  wire_check.py publisher TOOL   kvroute publishes a fixed script in every encoding; pyzmq
                                 subscribes, msgpack decodes, every frame and field is checked;
                                 a DEALER checks replay framing and repairs a dropped message.
  wire_check.py subscriber TOOL  Python packs batches of every generation (arrays, maps,
                                 int64/uint64/bin hashes, 2-element and map batches, bigram
                                 tokens, unknown fields) and publishes them on an XPUB socket;
                                 kvroute decodes them and prints canonical JSON that is compared
                                 with Python's own normalisation. A missing message is served
                                 by a Python ROUTER to check the subscriber's replay client.
"""
import json
import struct
import subprocess
import sys
import time

import msgpack
import zmq

H1 = 0x2CEABCFAE6D332EA
H2 = 0xFEDCBA9876543210
END = b"\xff" * 8
TIMEOUT_MS = 10000

# The script of kv_wire_tool's ScriptedBatches(), as vLLM structs (None = Python None).
STORED_FIELDS = ["block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id",
                 "medium", "lora_name", "extra_keys", "group_idx", "kv_cache_spec_kind",
                 "kv_cache_spec_sliding_window"]
REMOVED_FIELDS = ["block_hashes", "medium", "group_idx"]
DEFAULTED = {"extra_keys", "group_idx", "kv_cache_spec_kind", "kv_cache_spec_sliding_window"}


def stored(**kw):
    ev = {f: None for f in STORED_FIELDS}
    ev.update(kw)
    ev["extra_keys"] = [None] * len(ev["block_hashes"])
    return ("BlockStored", ev)


def removed(**kw):
    ev = {f: None for f in REMOVED_FIELDS}
    ev.update(kw)
    return ("BlockRemoved", ev)


SCRIPT = [
    (1700000000.5, [stored(block_hashes=[H1, H2], token_ids=list(range(1, 33)), block_size=16,
                           medium="GPU", group_idx=0, kv_cache_spec_kind="full_attention")]),
    (1700000001.25, [stored(block_hashes=[5], parent_block_hash=H2,
                            token_ids=list(range(100, 116)), block_size=16, lora_id=3,
                            medium="CPU", lora_name="adapter-a"),
                     removed(block_hashes=[H1], medium="GPU", group_idx=0)]),
    (1700000002.0, [("AllBlocksCleared", {}), removed(block_hashes=[7, 8])]),
    (1700000003.0, [stored(block_hashes=[(1 << 63) + 1], parent_block_hash=5, token_ids=[0] * 16,
                           block_size=16, medium="GPU", group_idx=1,
                           kv_cache_spec_kind="sliding_window", kv_cache_spec_sliding_window=4096)]),
]


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def to_signed(h):
    return h - (1 << 64) if h >= 1 << 63 else h


def wire_hash(h, hashes):
    if hashes == "signed":
        return to_signed(h)
    if hashes == "bin":
        return h.to_bytes(8, "big")
    return h


def expected_event(tag, ev, events, fields, hashes):
    """The decoded msgpack object vLLM would send for one event."""
    def conv(name, value):
        if name in ("block_hashes",):
            return [wire_hash(h, hashes) for h in value]
        if name == "parent_block_hash" and value is not None:
            return wire_hash(value, hashes)
        return value

    if tag == "AllBlocksCleared":
        return [tag] if events == "array" else {"type": tag}
    names = STORED_FIELDS if tag == "BlockStored" else REMOVED_FIELDS
    if events == "array":
        if tag == "BlockStored":
            names = names[:fields]
        else:  # BlockRemoved gained medium with stored field 6, group_idx with field 9
            names = names[:1 + (fields >= 6) + (fields >= 9)]
        return [tag] + [conv(n, ev[n]) for n in names]
    out = {"type": tag}
    for n in names:
        if n in DEFAULTED and ev[n] is None:
            continue  # omit_defaults
        out[n] = conv(n, ev[n])
    return out


def expected_batch(ts, evs, events, batch, fields, hashes):
    body = [expected_event(t, e, events, fields, hashes) for t, e in evs]
    if batch == "array":
        return [ts, body, 0]
    if batch == "array2":
        return [ts, body]
    return {"ts": ts, "events": body, "data_parallel_rank": 0}


def check_encoding(payload, want):
    """Byte level: packs the expected object with msgpack-python, an independent encoder that
    follows msgspec's rules (float64 floats, smallest int forms, str8+ strings, bin for bytes,
    dict keys in insertion order = declaration order), and requires identical bytes. This is
    what checks key order, which dict equality ignores."""
    packed = msgpack.packb(want, use_bin_type=True, use_single_float=False)
    check(packed == payload, "payload bytes differ from the spec's encoding:\n got  %s\n want %s"
          % (payload.hex(), packed.hex()))


def recv_multipart(sock, timeout_ms=TIMEOUT_MS):
    if not sock.poll(timeout_ms):
        raise AssertionError("timed out waiting for a message")
    return sock.recv_multipart()


def run_publisher_case(tool, ctx, events, batch, fields, hashes, drop):
    args = [tool, "publish", "--endpoint", "tcp://127.0.0.1:*", "--replay", "tcp://127.0.0.1:*",
            "--topic", "kv@pod-1@model", "--events", events, "--batch", batch, "--fields",
            str(fields), "--hashes", hashes]
    for d in drop:
        args += ["--drop", str(d)]
    proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        hello = json.loads(proc.stdout.readline())
        sub = ctx.socket(zmq.SUB)
        sub.setsockopt(zmq.LINGER, 0)
        sub.setsockopt(zmq.SUBSCRIBE, b"kv@")
        sub.connect(hello["endpoint"])
        time.sleep(0.5)  # ZeroMQ slow joiner: let the subscription reach the PUB socket
        proc.stdin.write("go\n")
        proc.stdin.flush()
        check(json.loads(proc.stdout.readline())["published"] == len(SCRIPT), "published count")

        want = [expected_batch(ts, evs, events, batch, fields, hashes) for ts, evs in SCRIPT]
        live = [s for s in range(len(SCRIPT)) if s not in drop]
        payloads = {}
        for seq in live:
            frames = recv_multipart(sub)
            check(len(frames) == 3, "expected 3 frames, got %d" % len(frames))
            check(frames[0] == b"kv@pod-1@model", "topic frame %r" % frames[0])
            check(len(frames[1]) == 8, "seq frame is %d bytes" % len(frames[1]))
            got_seq = struct.unpack(">Q", frames[1])[0]
            check(got_seq == seq, "seq %d, expected %d (big-endian, from 0)" % (got_seq, seq))
            obj = msgpack.unpackb(frames[2], raw=False)
            check(obj == want[seq], "batch %d:\n got  %r\n want %r" % (seq, obj, want[seq]))
            check(isinstance(obj[0] if isinstance(obj, list) else obj["ts"], float), "ts float")
            check_encoding(frames[2], want[seq])
            payloads[seq] = frames[2]
        check(not sub.poll(200), "unexpected extra message")

        # Replay: [b"", start] from a DEALER -> [b"", seq, payload]... then [b"", FF*8, b""].
        dealer = ctx.socket(zmq.DEALER)
        dealer.setsockopt(zmq.LINGER, 0)
        dealer.connect(hello["replay"])
        start = 1
        dealer.send_multipart([b"", struct.pack(">Q", start)])
        for seq in range(start, len(SCRIPT)):
            frames = recv_multipart(dealer)
            check(len(frames) == 3 and frames[0] == b"", "replay frames %r" % frames[:2])
            check(struct.unpack(">Q", frames[1])[0] == seq, "replay seq")
            obj = msgpack.unpackb(frames[2], raw=False)
            check(obj == want[seq], "replayed batch %d differs" % seq)
            if seq in payloads:
                check(payloads[seq] == frames[2], "replayed bytes differ from live bytes")
        frames = recv_multipart(dealer)
        check(frames == [b"", END, b""], "end marker %r" % frames)
        # A malformed request is ignored (vLLM: anything but 3 frames at the ROUTER).
        dealer.send_multipart([b"", b"x", b"y"])
        check(not dealer.poll(300), "malformed replay request was answered")
        dealer.close()
        sub.close()
    finally:
        if proc.stdin and not proc.stdin.closed:
            proc.stdin.close()
        proc.wait(timeout=10)
    check(proc.returncode == 0, "tool exit status %d" % proc.returncode)


def publisher(tool):
    ctx = zmq.Context()
    cases = [
        ("map", "array", 11, "unsigned", []),     # vLLM main
        ("array", "array", 11, "unsigned", []),   # before PR #42892, all fields
        ("array", "array", 6, "unsigned", [2]),   # v0.11 (medium), message 2 lost on the wire
        ("array", "array2", 5, "signed", []),     # v0.9.0: 2-element batch, builtin-hash ints
        ("map", "map", 11, "bin", []),            # map batch (one main snapshot), bytes hashes
    ]
    for case in cases:
        run_publisher_case(tool, ctx, *case)
        print("ok publisher", case)
    ctx.term()


# ---- subscriber direction ---------------------------------------------------------------

def norm_hash(h):
    if isinstance(h, bytes):
        return int.from_bytes(h[-8:], "big")
    return h & ((1 << 64) - 1)


def canonical(obj):
    """What kvroute's canonical JSON must say for a batch Python packed (spec §1.6 rules)."""
    if isinstance(obj, dict):
        ts, evs, rank = obj["ts"], obj["events"], obj.get("data_parallel_rank")
    else:
        ts, evs, rank = obj[0], obj[1], obj[2] if len(obj) > 2 else None
    out_events = []
    for ev in evs:
        if isinstance(ev, list):
            tag = ev[0]
            order = STORED_FIELDS if tag == "BlockStored" else REMOVED_FIELDS
            fields = {n: v for n, v in zip(order, ev[1:])}
        else:
            tag = ev["type"]
            fields = ev
        if tag == "AllBlocksCleared":
            out_events.append({"type": tag})
            continue
        if tag not in ("BlockStored", "BlockRemoved"):
            continue  # unknown event types are skipped
        e = {"type": tag, "block_hashes": [norm_hash(h) for h in fields["block_hashes"]]}
        if tag == "BlockStored":
            p = fields.get("parent_block_hash")
            e["parent_block_hash"] = None if p is None else norm_hash(p)
            e["token_ids"] = [t[0] if isinstance(t, list) else t for t in fields["token_ids"]]
            e["block_size"] = fields["block_size"]
            for n in ("lora_id", "medium", "lora_name", "group_idx", "kv_cache_spec_kind",
                      "kv_cache_spec_sliding_window"):
                e[n] = fields.get(n)
        else:
            e["medium"] = fields.get("medium")
            e["group_idx"] = fields.get("group_idx")
        out_events.append(e)
    return {"ts": float(ts), "data_parallel_rank": rank, "events": out_events}


def generation_batches():
    """Batches of every generation, packed by msgpack-python."""
    toks = list(range(1, 17))
    return [
        # v0.9.0: [ts, events], BlockStored 6 elements, BlockRemoved [tag, hashes], int64 hash
        [1.0, [["BlockStored", [H1, -5], None, toks + toks, 16, None],
               ["BlockRemoved", [-5]]]],
        # v0.9.1+: rank, medium, lora_name
        [2.0, [["BlockStored", [H2], H1, toks, 16, 7, "CPU", "lora-x"],
               ["BlockRemoved", [H2], "CPU"]], 0],
        # 12-element array event plus two unknown trailing fields; BlockRemoved with group_idx
        [3.0, [["BlockStored", [1 << 63], None, toks, 16, None, "GPU", None, [None], 0,
                "full_attention", None, "locality", {"x": [1]}],
               ["BlockRemoved", [1 << 63], "GPU", 0, "future"]], 1],
        # map events, keys in a different order, unknown key, bin hashes, bigram tokens
        [4.0, [{"type": "BlockStored", "token_ids": [[t, t + 1] for t in toks],
                "block_hashes": [bytes(range(32))], "parent_block_hash": b"\x01\x02",
                "block_size": 16, "lora_id": None, "medium": None, "lora_name": None,
                "unknown": {"a": [1, 2]}},
               {"block_hashes": [bytes(range(24, 32))], "type": "BlockRemoved", "medium": "GPU"},
               {"type": "BlockMoved", "block_hashes": [1]},
               {"type": "AllBlocksCleared"}], None],
        # map batch (no rank key)
        {"events": [["AllBlocksCleared"]], "ts": 5},
        # map batch with rank, sliding window
        {"ts": 6.5, "events": [{"type": "BlockStored", "block_hashes": [9], "parent_block_hash": None,
                                "token_ids": toks, "block_size": 16, "lora_id": None,
                                "medium": "GPU", "lora_name": None, "group_idx": 2,
                                "kv_cache_spec_kind": "sliding_window",
                                "kv_cache_spec_sliding_window": 128}],
         "data_parallel_rank": 3},
    ]


def subscriber(tool):
    ctx = zmq.Context()
    pub = ctx.socket(zmq.XPUB)
    pub.setsockopt(zmq.LINGER, 0)
    port = pub.bind_to_random_port("tcp://127.0.0.1")
    router = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    rport = router.bind_to_random_port("tcp://127.0.0.1")
    batches = generation_batches()
    lost = 2  # sent only through replay
    proc = subprocess.Popen([tool, "subscribe", "--endpoint", "tcp://127.0.0.1:%d" % port,
                             "--replay", "tcp://127.0.0.1:%d" % rport, "--topic", "kv@",
                             "--count", str(len(batches)), "--timeout-ms", "15000"],
                            stdout=subprocess.PIPE, text=True)
    try:
        check(json.loads(proc.stdout.readline())["endpoint"].startswith("tcp://"), "hello")
        # XPUB reports the subscription: no sleep needed for the slow joiner.
        sub_msg = recv_multipart(pub)
        check(sub_msg == [b"\x01kv@"], "subscription %r" % sub_msg)
        payloads = [msgpack.packb(b, use_bin_type=True) for b in batches]
        # Another topic: filtered out by the SUB socket, never seen by the subscriber.
        pub.send_multipart([b"other", struct.pack(">Q", 0), payloads[0]])
        # Frames that must be dropped as malformed: wrong frame count, short seq.
        pub.send_multipart([b"kv@x", struct.pack(">Q", 0)])
        pub.send_multipart([b"kv@x", b"\x00\x00", payloads[0]])
        for seq, payload in enumerate(payloads):
            if seq != lost:
                pub.send_multipart([b"kv@x", struct.pack(">Q", seq), payload])
        # Serve the replay request the gap causes.
        req = recv_multipart(router)
        check(len(req) == 3 and req[1] == b"" and len(req[2]) == 8, "replay request %r" % req)
        start = struct.unpack(">Q", req[2])[0]
        check(start == lost, "replay start %d" % start)
        for seq in range(start, len(payloads)):
            router.send_multipart([req[0], b"", struct.pack(">Q", seq), payloads[seq]])
        router.send_multipart([req[0], b"", END, b""])
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    check(proc.returncode == 0, "tool exit status %d" % proc.returncode)
    lines = [json.loads(l) for l in out.splitlines()]
    delivered = [l for l in lines if "seq" in l]
    check([d["seq"] for d in delivered] == list(range(len(batches))),
          "delivery order %r" % [d["seq"] for d in delivered])
    for d in delivered:
        want = canonical(batches[d["seq"]])
        check(d["batch"] == want, "seq %d:\n got  %r\n want %r" % (d["seq"], d["batch"], want))
    check(not any("stale" in l and l["stale"] for l in lines), "worker reported stale")
    stats = lines[-1]["stats"]
    check(stats["messages"] == 2 + len(batches) - 1, "message count %r" % stats)
    check(stats["malformed"] == 2, "malformed count %r" % stats)
    check(stats["replayed"] == 1 and stats["gaps"] == 1, "replay stats %r" % stats)
    check(stats["unknown_events"] == 1, "unknown events %r" % stats)
    print("ok subscriber: %d batches of every generation" % len(batches))
    ctx.destroy(linger=0)


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("publisher", "subscriber"):
        print(__doc__)
        return 2
    {"publisher": publisher, "subscriber": subscriber}[sys.argv[1]](sys.argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main())

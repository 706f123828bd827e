"""Bad input against the live gateway: the shared corpus (src/api/testdata/bad_requests.json)
replayed case by case, an oversized body, an unknown model, and API keys. Every case gets its
expected 4xx with an OpenAI error object, and no worker sees any of them.

Usage: bad_input_test.py <kvroute binary> <bad_requests.json>"""

import json
import socket
import sys

from cluster import Cases, Cluster, check, get, metric_sum, parse_prom, post

binary, corpus_path = sys.argv[1], sys.argv[2]
corpus = json.load(open(corpus_path))
cases = Cases()


def raw_exchange(port, data, timeout=5):
    """Sends `data` on a fresh loopback connection; returns (what came back until the server
    closed, whether it closed within `timeout`)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        got = b""
        while True:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                return got, False
            except ConnectionResetError:
                return got, True
            if not chunk:
                return got, True
            got += chunk
    finally:
        s.close()


def worker_side_counts(c):
    sims = sum(metric_sum(s.metrics(), "vllm:request_success_total") +
               metric_sum(s.metrics(), "vllm:num_requests_running") for s in c.sims)
    m = parse_prom(get(c.port, "/metrics")[2])
    routed = sum(v for l, v in m.get("kvroute_requests_total", []) if l.get("worker"))
    return sims, routed


with Cluster(binary, n=2, extra_yaml="limits: {max_body_bytes: 65536}\n") as c:
    before = worker_side_counts(c)

    def corpus_replay():
        check(len(corpus) >= 100, len(corpus))
        bad = []
        for case in corpus:
            status, headers, body = post(c.port, case["path"], case["body"].encode())
            ok = status == case["status"] and "x-kvroute-worker" not in headers
            try:
                err = json.loads(body)["error"]
                ok = ok and err["message"] and err.get("param") == case["param"]
            except (ValueError, KeyError, TypeError):
                ok = False
            if not ok:
                bad.append((case["name"], status, body[:200]))
        check(not bad, "%d cases wrong, first: %s" % (len(bad), bad[:3]))

    def oversized_body_is_413():
        big = json.dumps({"model": "sim-model", "prompt": "x" * 70000})
        status, _, body = post(c.port, "/v1/completions", big.encode())
        check(status == 413 and json.loads(body)["error"]["message"], (status, body[:200]))

    def unknown_model_is_404():
        status, _, body = post(c.port, "/v1/completions", {"model": "nope", "prompt": "x"})
        check(status == 404 and json.loads(body)["error"]["code"] == "model_not_found", body)

    def context_too_long_is_400():
        status, _, body = post(c.port, "/v1/completions",
                               {"model": "sim-model", "prompt": "x", "max_tokens": 10 ** 7})
        check(status == 400 and "maximum context length" in json.loads(body)["error"]["message"], body)

    def smuggling_is_400_and_closes():
        body = json.dumps({"model": "sim-model", "prompt": "x", "max_tokens": 1}).encode()
        data = (b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\nContent-Length: %d\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n"
                % (len(body), len(body), body))
        got, closed = raw_exchange(c.port, data)
        head, _, rest = got.partition(b"\r\n\r\n")
        check(head.startswith(b"HTTP/1.1 400 "), got[:200])
        check(b"\r\nconnection: close" in head.lower(), head)
        err = json.loads(rest)["error"]
        check(err["message"] and err["code"] == 400, rest)
        check(closed, "the gateway closed the connection")

    def no_worker_saw_any_of_it():
        check(worker_side_counts(c) == before, "%s -> %s" % (before, worker_side_counts(c)))

    cases.run("the bad-request corpus gets its 4xx from the gateway", corpus_replay)
    cases.run("a body over the limit is 413", oversized_body_is_413)
    cases.run("an unknown model is 404", unknown_model_is_404)
    cases.run("a context longer than the window is 400", context_too_long_is_400)
    cases.run("Content-Length with Transfer-Encoding: chunked is 400 and closes",
              smuggling_is_400_and_closes)
    cases.run("no worker saw any bad request", no_worker_saw_any_of_it)

with Cluster(binary, n=1, extra_yaml="api_keys: [k-123]\n") as c:

    def api_key_required():
        body = {"model": "sim-model", "prompt": "x", "max_tokens": 1}
        status, _, text = post(c.port, "/v1/completions", body)
        check(status == 401 and json.loads(text)["error"]["code"] == "invalid_api_key", text)
        status, _, _ = post(c.port, "/v1/completions", body, headers={"Authorization": "Bearer nope"})
        check(status == 401, status)
        status, _, _ = post(c.port, "/v1/completions", body, headers={"Authorization": "Bearer k-123"})
        check(status == 200, status)
        check(get(c.port, "/health")[0] == 200, "health stays open")

    cases.run("API keys are enforced on /v1", api_key_required)

cases.exit()

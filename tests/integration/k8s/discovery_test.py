"""InferencePool discovery (src/k8s PoolWatcher) against a local HTTP server that replays
RECORDED-SHAPE Kubernetes API responses (tests/integration/k8s/recorded/: written by hand in the
API server's shapes, not captured from a cluster). THIS IS A FAKE: no Kubernetes API server can
run on the machines this project is tested on. It covers: the pool object read first; a list
(add of the ready pod only); a watch from the list's resourceVersion with bookmarks allowed —
add, modify (a pod becomes ready), bookmark; a dropped watch, resumed from the BOOKMARK's
resourceVersion without a relist; a terminating pod (deletionTimestamp) drained at once, then
deleted; ERROR 410 in the stream → relist (the pod the new list lacks leaves); HTTP 410 on a
watch → relist; the service-account bearer token on every request.

With `endpointslices` the same choreography runs over the EndpointSlices of Service vllm-qwen
(recorded/slicelist-*.json, slice-watch-*.jsonl): endpoints added in a new slice and turning
ready, a bookmark, a dropped watch, an endpoint terminating (still serving) drained then
removed, a slice DELETED, ERROR 410 and HTTP 410 → relist; only the pool's target port of the
ports each slice lists becomes a worker.

usage: discovery_test.py KVROUTE_K8S_POOL_WATCH RECORDED_DIR [endpointslices]"""

import http.server
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

tool, recorded = sys.argv[1], sys.argv[2]
SLICES = len(sys.argv) > 3 and sys.argv[3] == "endpointslices"
if SLICES:
    COLLECTION = "/apis/discovery.k8s.io/v1/namespaces/llm/endpointslices"
    LIST, WATCH = "slicelist-%d.json", "slice-watch-%d.jsonl"
    SELECTOR = "kubernetes.io/service-name=vllm-qwen"
    EXTRA_ARGS = ["--endpointslices=vllm-qwen"]
else:
    COLLECTION = "/api/v1/namespaces/llm/pods"
    LIST, WATCH = "podlist-%d.json", "watch-%d.jsonl"
    SELECTOR = "app=vllm-qwen"
    EXTRA_ARGS = []


def load(name):
    with open(os.path.join(recorded, name), "rb") as f:
        return f.read()


class Fake:
    def __init__(self):
        self.requests = []  # (kind, query, authorization)
        self.lists = 0
        self.watches = 0
        self.release = threading.Event()
        self.last_watch = threading.Event()
        self.lock = threading.Lock()


fake = Fake()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        auth = self.headers.get("Authorization", "")
        if url.path == "/apis/inference.networking.k8s.io/v1/namespaces/llm/inferencepools/qwen-pool":
            with fake.lock:
                fake.requests.append(("pool", query, auth))
            return self.reply(200, load("inferencepool.json"))
        if url.path != COLLECTION:
            return self.reply(404, b'{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}')
        if query.get("watch") != "true":
            with fake.lock:
                fake.lists += 1
                n = fake.lists
                fake.requests.append(("list", query, auth))
            return self.reply(200, load(LIST % (1 if n == 1 else 2)))
        with fake.lock:
            fake.watches += 1
            n = fake.watches
            fake.requests.append(("watch", query, auth))
        if n == 3:  # the history is gone: 410 as the HTTP status of the watch itself
            return self.reply(410, b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
                                   b'"message":"too old resource version: 2000 (2400)","reason":"Expired","code":410}')
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        if n in (1, 2):
            for line in load(WATCH % n).splitlines(keepends=True):
                self.chunk(line)
            if n == 1:
                self.close_connection = True  # dropped mid-stream: no final chunk
                self.connection.shutdown(2)
                return
            self.wfile.write(b"0\r\n\r\n")  # after the ERROR the server ends the watch
            self.wfile.flush()
            return
        fake.last_watch.set()
        fake.release.wait(30)  # held open, silent, until the test ends
        try:
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
threading.Thread(target=server.serve_forever, daemon=True).start()
port = server.server_address[1]

failures = 0


def check(name, cond, detail=""):
    global failures
    print(("ok   " if cond else "FAIL ") + name + ("" if cond else " " + str(detail)), flush=True)
    if not cond:
        failures += 1


with tempfile.TemporaryDirectory() as d:
    token_file = os.path.join(d, "token")
    with open(token_file, "w") as f:
        f.write("recorded-fake-token\n")
    p = subprocess.Popen([tool, "http://127.0.0.1:%d" % port, "llm", "qwen-pool", "qwen", token_file] + EXTRA_ARGS,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    reached = fake.last_watch.wait(30)
    check("the watcher reached its fourth watch", reached)
    fake.release.set()
    p.stdin.close()
    try:
        out = p.stdout.read().decode()
        code = p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        out, code = "", "timeout"
    check("the tool stops when its stdin closes", code == 0, code)
server.shutdown()

lines = out.splitlines()
print("\n".join("    | " + l for l in lines))
members = [l for l in lines if l.split(" ")[0] in ("join", "drain", "leave")]
if SLICES:
    expected = [
        "join vllm-a:8000 http://10.2.0.11:8000",  # list 1: the ready endpoint only, port 8000 not 5557
        "join vllm-c:8000 http://10.2.0.13:8000",  # watch 1: ADDED slice m4d9s, ready
        "join vllm-b:8000 http://10.2.0.12:8000",  # watch 1: MODIFIED slice 7xk2p, b now ready
        "drain vllm-a:8000",                       # watch 2: terminating (still serving)
        "leave vllm-a:8000",                       # watch 2: removed from its slice
        "leave vllm-c:8000",                       # watch 2: its slice DELETED
        "join vllm-d:8000 http://10.2.0.14:8000",  # relist after 410: new endpoint
    ]
else:
    expected = [
        "join vllm-a:8000 http://10.2.0.11:8000",  # list 1: the ready pod only
        "join vllm-c:8000 http://10.2.0.13:8000",  # watch 1: ADDED ready
        "join vllm-b:8000 http://10.2.0.12:8000",  # watch 1: MODIFIED, now ready
        "drain vllm-a:8000",                       # watch 2: deletionTimestamp set
        "leave vllm-a:8000",                       # watch 2: DELETED
        "join vllm-d:8000 http://10.2.0.14:8000",  # relist after 410: new pod
        "leave vllm-c:8000",                       # relist after 410: gone
    ]
check("membership calls, in order", members == expected, "\n".join(members))
steps = [l for l in lines if l.startswith("step ")]
check("the pool's failureMode and ports were read",
      any("pool qwen-pool selector=app=vllm-qwen ports=8000 failureMode=FailOpen" in s for s in steps), steps[:2])
if SLICES:
    check("the watcher says it follows the Service's EndpointSlices",
          any("from endpointslices of vllm-qwen" in s for s in steps), steps[:2])
check("the dropped watch was noticed", any(s.startswith("step dropped") for s in steps), steps)
check("410 in the stream and as a status both noticed",
      any("gone (ERROR 410)" in s for s in steps) and any("gone (HTTP 410)" in s for s in steps), steps)

reqs = fake.requests
kinds = [k for k, _, _ in reqs]
check("requests: pool, list, watch, watch, list, watch(410), list, watch",
      kinds[:8] == ["pool", "list", "watch", "watch", "list", "watch", "list", "watch"], kinds)
watches = [q for k, q, _ in reqs if k == "watch"]
lists = [q for k, q, _ in reqs if k == "list"]
check("every list and watch selects " + SELECTOR,
      all(q.get("labelSelector") == SELECTOR for q in lists + watches), lists + watches)
check("watches allow bookmarks", all(q.get("allowWatchBookmarks") == "true" for q in watches), watches)
check("the first watch starts at the list's resourceVersion", watches and watches[0].get("resourceVersion") == "1000", watches)
check("the dropped watch resumes from the bookmark's resourceVersion, without a relist",
      len(watches) > 1 and watches[1].get("resourceVersion") == "1100" and kinds[3] == "watch", watches)
check("after 410 the watch starts at the relist's resourceVersion",
      len(watches) > 3 and watches[2].get("resourceVersion") == "2000" and watches[3].get("resourceVersion") == "2000", watches)
check("the service-account token is sent on every request",
      all(a == "Bearer recorded-fake-token" for _, _, a in reqs), {a for _, _, a in reqs})
sys.exit(1 if failures else 0)

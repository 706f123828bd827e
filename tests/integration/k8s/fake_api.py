"""A local stand-in for the Kubernetes API server, for the k8s integration tests that run
`kvroute serve` with discovery.kubernetes. THIS IS A FAKE: no Kubernetes API server can run on
the machines this project is tested on. Its answers have the shapes of recorded/ (hand-written
in the API server's shapes): GET of one InferencePool, list and watch of pods or of
EndpointSlices, GET of one pod, and of further collections such as InferenceObjectives (chunked,
one `{"type", "object"}` event a line). The test scripts the watch: events pushed with push()
go out on the open watch (or the next one); a watch with nothing to send ends after
min(timeoutSeconds, 5) s, as a real one ends at its timeout.

Served over plain HTTP, or over TLS when given a certificate and key (Python's ssl module;
the test makes its own CA and certificates with make_ca/make_cert, the openssl CLI).

Imported by path: tests add tests/integration/k8s/ to sys.path."""

import http.server
import json
import os
import queue
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse


def pod(name, ip, rv, labels, terminating=False, ready=True, annotations=None, containers=None):
    """A Pod as the API returns it, trimmed to what kvroute reads."""
    meta = {"name": name, "namespace": "llm", "uid": "uid-" + name, "resourceVersion": str(rv),
            "labels": dict(labels, **{"pod-template-hash": "6d9f8b7c5"})}
    if annotations:
        meta["annotations"] = annotations
    if terminating:
        meta["deletionTimestamp"] = "2026-11-30T10:00:00Z"
        meta["deletionGracePeriodSeconds"] = 75
    return {"kind": "Pod", "apiVersion": "v1", "metadata": meta,
            "spec": {"containers": containers or [{"name": "vllm", "image": "vllm/vllm-openai:v0.11.0"}]},
            "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def endpoint_slice(name, service, rv, endpoints, ports):
    """An EndpointSlice (discovery.k8s.io/v1) of `service`; endpoints: [(pod, ip, ready,
    serving, terminating)]; ports: [(name, number)]."""
    return {"kind": "EndpointSlice", "apiVersion": "discovery.k8s.io/v1",
            "metadata": {"name": name, "namespace": "llm", "resourceVersion": str(rv),
                         "labels": {"kubernetes.io/service-name": service,
                                    "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [ip], "conditions": {"ready": r, "serving": sv, "terminating": t},
                           "targetRef": {"kind": "Pod", "namespace": "llm", "name": pod}}
                          for pod, ip, r, sv, t in endpoints],
            "ports": [{"name": n, "protocol": "TCP", "port": p} for n, p in ports]}


def inference_pool(name, namespace, selector, port):
    return {"apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": "812"},
            "spec": {"selector": {"matchLabels": selector}, "targetPorts": [{"number": port}],
                     "endpointPickerRef": {"name": "kvroute-epp", "port": {"number": 9002},
                                           "failureMode": "FailOpen"}}}


class FakeApi:
    """Serves one namespace's InferencePool and pods. `requests` records (path, query,
    authorization) of every request that reached HTTP (a refused TLS handshake never does);
    `tls_failures` counts handshakes that failed on the server's side."""

    def __init__(self, namespace, pool, pods, list_rv="1000", certfile=None, keyfile=None, slices=None,
                 collections=None):
        self.namespace = namespace
        self.pool = pool
        self.pods = list(pods)
        # With `slices`, the collection served is EndpointSlices instead of pods.
        self.slices = None if slices is None else list(slices)
        self.list_rv = list_rv
        self.events = queue.Queue()
        # Further collections by path (e.g. /apis/llm-d.ai/v1alpha2/namespaces/llm/inferenceobjectives):
        # {"kind": list kind, "items": [...], "rv": list resourceVersion}, each with its own watch
        # queue (push_to). Any
        # other path is 404, as a CRD that is not installed answers.
        self.collections = {path: dict(c, events=queue.Queue()) for path, c in (collections or {}).items()}
        self.requests = []
        self.tls_failures = 0
        self.lock = threading.Lock()
        fake = self

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                if isinstance(sys.exc_info()[1], ssl.SSLError):
                    with fake.lock:
                        fake.tls_failures += 1

        self.server = Server(("127.0.0.1", 0), self._handler())
        self.tls = certfile is not None
        if self.tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(certfile, keyfile)
            # The handshake runs in the handler's thread, so a refused one is counted, not fatal.
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True,
                                                 do_handshake_on_connect=False)
        self.port = self.server.server_address[1]
        self.url = "%s://127.0.0.1:%d" % ("https" if self.tls else "http", self.port)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def push(self, kind, obj):
        self.events.put((kind, obj))

    def push_to(self, path, kind, obj):
        """An event on the watch of collection `path` (one of `collections`)."""
        self.collections[path]["events"].put((kind, obj))

    def seen(self):
        with self.lock:
            return list(self.requests)

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def _handler(self):
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def setup(self):
                if fake.tls:
                    self.request.do_handshake()
                super().setup()

            def reply(self, status, obj):
                body = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def event(self, kind, obj):
                data = (json.dumps({"type": kind, "object": obj}) + "\n").encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()

            def do_GET(self):
                url = urllib.parse.urlparse(self.path)
                query = dict(urllib.parse.parse_qsl(url.query))
                with fake.lock:
                    fake.requests.append((url.path, query, self.headers.get("Authorization")))
                ns = "/namespaces/%s/" % fake.namespace
                if url.path == "/apis/inference.networking.k8s.io/v1" + ns + "inferencepools/" + fake.pool["metadata"]["name"]:
                    return self.reply(200, fake.pool)
                if url.path.startswith("/api/v1" + ns + "pods/"):  # GET one pod (by name)
                    name = url.path.rsplit("/", 1)[1]
                    found = [p for p in fake.pods if p["metadata"]["name"] == name]
                    if found:
                        return self.reply(200, found[0])
                    return self.reply(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                            "reason": "NotFound", "code": 404})
                events, list_rv = fake.events, fake.list_rv
                if url.path in fake.collections:
                    c = fake.collections[url.path]
                    collection, kind, items, events = url.path, c["kind"], c["items"], c["events"]
                    list_rv = c.get("rv", list_rv)
                elif fake.slices is None:
                    collection, kind, items = "/api/v1" + ns + "pods", "PodList", fake.pods
                else:
                    collection, kind, items = ("/apis/discovery.k8s.io/v1" + ns + "endpointslices",
                                               "EndpointSliceList", fake.slices)
                if url.path != collection:
                    return self.reply(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                            "reason": "NotFound", "code": 404})
                if query.get("watch") != "true":
                    return self.reply(200, {"kind": kind, "apiVersion": "v1",
                                            "metadata": {"resourceVersion": list_rv},
                                            "items": items})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                end = time.time() + min(5, float(query.get("timeoutSeconds", "5")))
                while time.time() < end:
                    try:
                        kind, obj = events.get(timeout=max(0.01, end - time.time()))
                    except queue.Empty:
                        break
                    self.event(kind, obj)
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

        return Handler


def _openssl(*args):
    subprocess.run(["openssl", *args], check=True, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=30)


def make_ca(folder, name):
    """A self-signed CA (P-256), valid one day: returns (cert, key) paths."""
    cert, key = os.path.join(folder, name + ".crt"), os.path.join(folder, name + ".key")
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=" + name,
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    return cert, key


def make_cert(folder, name, ca, san):
    """A server certificate signed by `ca` ((cert, key)) for `san` ("IP:127.0.0.1,DNS:x")."""
    cert, key = os.path.join(folder, name + ".crt"), os.path.join(folder, name + ".key")
    csr, ext = os.path.join(folder, name + ".csr"), os.path.join(folder, name + ".ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=%s\nextendedKeyUsage=serverAuth\n" % san)
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", key, "-out", csr, "-subj", "/CN=" + name)
    _openssl("x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1], "-CAcreateserial",
             "-out", cert, "-days", "1", "-extfile", ext)
    return cert, key

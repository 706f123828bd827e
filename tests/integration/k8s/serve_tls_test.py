"""`kvroute serve` reaching the Kubernetes API over TLS, as it does in a pod. THE API SERVER IS
A FAKE (fake_api.py: recorded-shape answers; no Kubernetes API server can run on the machines
this project is tested on), served over TLS by Python's ssl module with a CA and a server
certificate (IP SAN 127.0.0.1) this test makes with the openssl CLI. Checked:
  - in-cluster address: discovery.kubernetes has no api_url, KUBERNETES_SERVICE_HOST/PORT name
    the fake; the certificate verifies against ca_file, the pool's pod joins and serves a chat
    request, every API request carried the bearer token from token_file;
  - a wrong CA (another self-made CA): serve runs, the handshake is refused on every attempt
    (the fake sees failed handshakes and no HTTP request), the pod never joins, and the log
    says why: certificate verify failed, unable to get local issuer certificate, ca_file;
  - the right CA but a name the certificate does not hold (https://localhost:PORT): refused,
    the log names the host;
  - a ca_file that does not exist: serve refuses to start, naming the file.

usage: serve_tls_test.py KVROUTE"""

import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "gateway"))
sys.path.insert(0, HERE)
from cluster import Proc, SIM_READY, SERVE_READY, get, parse_prom  # noqa: E402
from fake_api import FakeApi, inference_pool, make_ca, make_cert, pod  # noqa: E402
from serve_probe import chat, fleet, wait_for  # noqa: E402

kvroute = sys.argv[1]
MODEL = "sim-model"
LABELS = {"app": "vllm-qwen"}
TOKEN = "sa-token-3f9c"


def write_config(work, name, discovery):
    path = os.path.join(work, name + ".yaml")
    with open(path, "w") as f:
        f.write("listen: {host: 127.0.0.1, port: 0}\nmode: approximate\n"
                "scrape_interval_s: 0.2\nhealth_interval_s: 0.3\nshutdown_grace_s: 0\n"
                "discovery:\n  kubernetes: {pool: qwen-pool, namespace: llm, models: [%s], %s}\n"
                % (MODEL, discovery))
    return path


def refused_run(api, cfg, name, expect_in_log):
    """serve against `api` with a config whose TLS must be refused: it runs, the pod never
    joins while the fake sees at least two failed handshakes and no HTTP request."""
    before_requests, before_failures = len(api.seen()), api.tls_failures
    serve = Proc([kvroute, "serve", "--config", cfg, "--log-level", "info"], SERVE_READY)
    try:
        port = int(serve.match.group(2))
        wait_for("two refused handshakes", lambda: api.tls_failures >= before_failures + 2)
        assert not fleet(port)[0], "%s: a worker joined: %s" % (name, fleet(port)[0])
        assert len(api.seen()) == before_requests, "%s: a request got through" % name
        log = serve.stderr()
        for text in expect_in_log:
            assert text in log, "%s: %r not in the log:\n%s" % (name, text, log[-3000:])
        line = next(l for l in log.splitlines() if "tls handshake" in l)
        m = parse_prom(get(port, "/metrics")[2])
        failures = sum(v for _, v in m.get("kvroute_discovery_kubernetes_failures_total", []))
        assert failures >= 2, "%s: kvroute_discovery_kubernetes_failures_total %s" % (name, failures)
        print("ok: %s refused (%d failures counted); serve logs: %s"
              % (name, failures, line.strip()[:300]))
    finally:
        serve.kill()


def main():
    work = tempfile.mkdtemp(prefix="kvroute-k8s-tls-")
    ca = make_ca(work, "cluster-ca")
    other_ca = make_ca(work, "other-ca")
    cert = make_cert(work, "apiserver", ca, "IP:127.0.0.1")
    token_file = os.path.join(work, "token")
    with open(token_file, "w") as f:
        f.write(TOKEN + "\n")
    sim = Proc([kvroute, "sim", "--host", "127.0.0.1", "--port", "0", "--served-model-name", MODEL,
                # A port of its own (not the default *:5557): these tests run side by side.
                "--kv-events-endpoint", "tcp://127.0.0.1:*", "--speedup", "20"], SIM_READY)
    api = None
    serve = None
    try:
        sim_port = int(sim.match.group(2))
        api = FakeApi("llm", inference_pool("qwen-pool", "llm", LABELS, sim_port),
                      [pod("vllm-a", "127.0.0.1", 990, LABELS)], certfile=cert[0], keyfile=cert[1])

        # In-cluster: the address from the environment, as kubelet sets it in every pod.
        os.environ["KUBERNETES_SERVICE_HOST"] = "127.0.0.1"
        os.environ["KUBERNETES_SERVICE_PORT"] = str(api.port)
        cfg = write_config(work, "in-cluster", "ca_file: '%s', token_file: '%s'" % (ca[0], token_file))
        serve = Proc([kvroute, "serve", "--config", cfg, "--log-level", "info"], SERVE_READY)
        port = int(serve.match.group(2))
        name = "vllm-a:%d" % sim_port
        wait_for("the pod to join over TLS", lambda: name in fleet(port)[0])
        status, worker, text = chat(port, MODEL, 1)
        assert status == 200 and worker == name, (status, worker, text[:300])
        seen = api.seen()
        assert seen and all(auth == "Bearer " + TOKEN for _, _, auth in seen), seen
        assert api.tls_failures == 0, api.tls_failures
        print("ok: in-cluster address over TLS: %d API requests, all with the token; pod served"
              % len(seen))
        serve.kill()
        serve = None
        del os.environ["KUBERNETES_SERVICE_HOST"]
        del os.environ["KUBERNETES_SERVICE_PORT"]

        refused_run(api, write_config(work, "wrong-ca", "api_url: '%s', ca_file: '%s'" % (api.url, other_ca[0])),
                    "a wrong CA", ["certificate verify failed", "unable to get local issuer certificate",
                                   "ca_file " + other_ca[0]])
        refused_run(api, write_config(work, "wrong-name", "api_url: 'https://localhost:%d', ca_file: '%s'"
                                      % (api.port, ca[0])),
                    "a name outside the certificate", ["certificate verify failed",
                                                       "the certificate does not name localhost"])

        missing = os.path.join(work, "no-such-ca.crt")
        p = subprocess.run([kvroute, "serve", "--config",
                            write_config(work, "no-ca", "api_url: '%s', ca_file: '%s'" % (api.url, missing))],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
        assert p.returncode != 0, "serve started with a missing CA file"
        assert "ca_file " + missing + ": not readable" in p.stderr, p.stderr[-2000:]
        print("ok: a missing ca_file stops serve at start (exit %d)" % p.returncode)
    except Exception:
        if serve:
            sys.stderr.write(serve.stderr()[-4000:])
        raise
    finally:
        if serve:
            serve.kill()
        sim.kill()
        if api:
            api.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

"""A prefill/decode fleet found only through etcd serves the two-leg path, as a static one does.

A real etcd on loopback; three `kvroute sim --etcd` (vLLM's NixlConnector protocol, sped up):
p (kv_producer), d0 (kv_consumer, --kv-link roce-100g), d1 (kv_consumer, the profile's first
link); `kvroute serve --etcd` with no static workers and Dynamo's token cap at 0 (split every
request D would prefill anything of: the test is about discovery, not about when splitting pays).

Checks:
  - the records in etcd carry role, tp, gpus and d0's link (docs/etcd.md);
  - serve holds them: /admin/workers shows p as prefill, d0 and d1 as decode, d0 on roce-100g
    and d1 on ib-400g with their lane bandwidths (× the sims' speedup);
  - POST /debug/route shows a split p -> d0/d1 over the discovered workers;
  - a chat completion is served in two legs (X-Kvroute-Prefill-Worker: p; decode on d0/d1;
    kvroute_pd_requests_total{placement="split"} 1), and the decode sim pulled KV (its NIXL
    histogram counts the pull).

Usage: etcd_pd_test.py <kvroute binary>
"""
import base64
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from etcd_cluster import MODEL, Etcd, EtcdServe, EtcdSim, wait_until  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "gateway"))
from cluster import get, metric_sum, parse_prom, post  # noqa: E402

BINARY = sys.argv[1]
SPEEDUP = 20  # EtcdSim's --speedup


def check(cond, message):
    if not cond:
        raise AssertionError(message)


def nixl(role):
    return ["--kv-transfer-config", json.dumps({"kv_connector": "NixlConnector", "kv_role": role}),
            "--kv-side-channel-host", "127.0.0.1", "--kv-side-channel-port", "0"]


def record(etcd, name):
    key = base64.b64encode(("/kvroute/workers/" + name).encode()).decode()
    kvs = etcd.call("/v3/kv/range", {"key": key}).get("kvs", [])
    check(len(kvs) == 1, "no etcd record for %s" % name)
    return json.loads(base64.b64decode(kvs[0]["value"]))


def admin_workers(port):
    return {w["name"]: w for w in json.loads(get(port, "/admin/workers")[2])["workers"]}


def main():
    if not os.access("/usr/bin/etcd", os.X_OK):
        print("skip: no /usr/bin/etcd")
        return 0
    null = os.open(os.devnull, os.O_RDONLY)  # children inherit a closed stdin
    os.dup2(null, 0)
    sims, serve = [], None
    with tempfile.TemporaryDirectory() as workdir:
        etcd = Etcd(workdir)
        etcd.start()
        try:
            sims.append(EtcdSim(BINARY, etcd, "p", extra=nixl("kv_producer")))
            sims.append(EtcdSim(BINARY, etcd, "d0",
                                extra=nixl("kv_consumer") + ["--kv-link", "roce-100g"]))
            sims.append(EtcdSim(BINARY, etcd, "d1", extra=nixl("kv_consumer")))
            p, d0 = record(etcd, "p"), record(etcd, "d0")
            check(p["role"] == "prefill" and d0["role"] == "decode", (p, d0))
            check(p["tp"] == 2 and p["gpus"] == 2, p)  # the default profile is TP2
            check(d0["link"] == "roce-100g" and "link" not in record(etcd, "d1"), d0)
            print("ok   records carry role, tp, gpus and link: %s" % json.dumps(d0), flush=True)

            serve = EtcdServe(BINARY, etcd, workdir,
                              "pd: {rule: dynamo_token_cap, token_cap: 0}\n")
            check(wait_until(lambda: serve.workers() == {"p", "d0", "d1"}, 10),
                  "serve's fleet: %s" % serve.workers())
            w = admin_workers(serve.port)
            check(w["p"]["role"] == "prefill" and w["p"]["tp"] == 2, w["p"])
            check(w["d0"]["role"] == "decode" and w["d1"]["role"] == "decode", w)
            l0, l1 = w["d0"]["kv_link"], w["d1"]["kv_link"]
            check(l0["name"] == "roce-100g" and l1["name"] == "ib-400g", (l0, l1))
            check(abs(l0["seed_lane_bytes_per_s"] - 12e9 * SPEEDUP) < 1e3 and
                  abs(l1["seed_lane_bytes_per_s"] - 49.5e9 * SPEEDUP) < 1e3, (l0, l1))
            print("ok   serve holds the discovered P/D fleet: p prefill TP2, d0 decode over "
                  "roce-100g (%.3g B/s per lane), d1 over ib-400g (%.3g B/s)"
                  % (l0["seed_lane_bytes_per_s"], l1["seed_lane_bytes_per_s"]), flush=True)

            body = {"model": MODEL, "max_tokens": 8,
                    "messages": [{"role": "user", "content": "discovered " * 200}]}
            status, _, text = post(serve.port, "/debug/route", body)
            check(status == 200, text)
            pd = json.loads(text).get("pd")
            check(pd and pd["split"] and pd["prefill_worker"] == "p" and
                  pd["decode_worker"] in ("d0", "d1") and pd["transfer_s"] > 0, text)
            print("ok   /debug/route: split p -> %s, transfer %.3g s"
                  % (pd["decode_worker"], pd["transfer_s"]), flush=True)

            status, headers, text = post(serve.port, "/v1/chat/completions", body)
            check(status == 200, text)
            check(headers.get("x-kvroute-prefill-worker") == "p", headers)
            decode = headers.get("x-kvroute-worker")
            check(decode in ("d0", "d1"), headers)
            m = serve.metrics()
            check(metric_sum(m, "kvroute_pd_requests_total", placement="split") == 1,
                  "splits: %s" % m.get("kvroute_pd_requests_total"))
            sim = next(s for s in sims if s.name == decode)
            pulls = metric_sum(parse_prom(get(sim.port, "/metrics")[2]), "vllm:nixl_xfer_time_seconds_count")
            check(pulls >= 1, "%s pulled nothing" % decode)
            print("ok   a chat completion served in two legs: prefill on p, decode on %s "
                  "(%d pull)" % (decode, pulls), flush=True)
            print("ok   pd", flush=True)
            return 0
        except Exception as e:  # noqa: BLE001
            import traceback
            traceback.print_exc()
            if serve:
                print("--- serve stderr (tail)\n" + serve.proc.stderr()[-3000:])
            print("FAIL pd: " + str(e))
            return 1
        finally:
            if serve:
                serve.proc.kill()
            for s in sims:
                s.proc.kill()  # by its pid (Proc.kill)
            etcd.stop()


if __name__ == "__main__":
    sys.exit(main())

"""kvroute serve placing requests by the P/D decision in front of one prefill sim and two decode
sims (vLLM's NixlConnector protocol, sped up), driven by the official npm clients
(pd_clients.mjs), then the prefill sim killed (SIGKILL, by its pid).

Checks, beyond the clients' per-turn checks (decode worker sticky per conversation, only the
new turn's blocks pulled, cached_tokens as the prefill sim counted them):
  - every conversation turn was split (kvroute_pd_requests_total{placement="split"});
  - each decode worker that pulled has its link learned from its sim's NIXL histograms
    (kvroute_kv_link_samples; the arithmetic is pd_link_feed_test.cc's);
  - after all legs ended no booking is left on any worker (kvroute_worker_inflight_requests)
    and the prefill sim holds no pinned blocks (every decode leg released its pull);
  - a decode sim killed between two turns: the next turn is placed again on the other decode
    worker and answered (kvroute_retries_total counts it), no booking left;
  - with the prefill sim dead, every request is still answered (decoded locally on a decode
    worker), and kvroute_pd_prefill_fallbacks_total counts those whose prefill leg failed
    before the prefill worker was ejected; the rest are placed aggregated at once.

Usage: /usr/bin/python3 pd_test.py <kvroute binary> <repo root>
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "gateway"))
from cluster import Proc, Sim, SERVE_READY, get, metric_sum, parse_prom, post  # noqa: E402

BINARY, ROOT = sys.argv[1], sys.argv[2]
SPEEDUP = "20"


def fail(msg):
    print(f"FAIL {msg}", flush=True)
    raise SystemExit(1)


def nixl(role):
    return ["--speedup", SPEEDUP,
            "--kv-transfer-config", json.dumps({"kv_connector": "NixlConnector", "kv_role": role}),
            "--kv-side-channel-host", "127.0.0.1", "--kv-side-channel-port", "0"]


def serve_metrics(port):
    return parse_prom(get(port, "/metrics")[2])


def run_clients(port, phase, sims):
    arg = {s.name: s.port for s in sims}
    arg["pids"] = {s.name: s.proc.p.pid for s in sims}  # started here; killed by pid only
    out = subprocess.run(
        ["node", os.path.join(HERE, "pd_clients.mjs"), ROOT, str(port), phase, json.dumps(arg)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=240)
    sys.stdout.write(out.stdout)
    if out.returncode != 0:
        fail(f"clients ({phase}) exited {out.returncode}: {out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])["requests"]


def debug_route_shows_the_split(port, sims):
    """POST /debug/route: the P/D placement (split, P and D, the rule's numbers, every option
    priced), and nothing sent to any sim."""
    before = sum(metric_sum(s.metrics(), "vllm:request_success_total") for s in sims)
    status, _, body = post(port, "/debug/route", {
        "model": "sim-model", "messages": [{"role": "user", "content": "plan " * 300}],
        "max_tokens": 8})
    if status != 200:
        fail(f"/debug/route answered {status}: {body}")
    d = json.loads(body)
    pd = d.get("pd")
    if not pd or not pd["split"] or pd["prefill_worker"] != "p" or \
            pd["decode_worker"] not in ("d0", "d1") or d["chosen"] != pd["decode_worker"]:
        fail(f"/debug/route shows no split placement p -> d0/d1: {body}")
    if d["policy"] != "pd:dynamo_token_cap" or pd["threshold_tokens"] != 0 or \
            pd["uncached_tokens"] <= 0 or not pd["transfer_s"] > 0:
        fail(f"/debug/route: the rule's numbers are missing: {body}")
    kinds = sorted(o["placement"] for o in pd["options"])
    if kinds != ["aggregated", "aggregated", "split"]:
        fail(f"/debug/route: options {kinds}, want aggregated on d0 and d1 and one split")
    after = sum(metric_sum(s.metrics(), "vllm:request_success_total") for s in sims)
    if before != after:
        fail("/debug/route sent a request to a sim")
    print(f"ok   /debug/route: split p -> {pd['decode_worker']}, {pd['uncached_tokens']} uncached "
          f"tokens > cap 0, transfer {pd['transfer_s']:.4g} s, split cost "
          f"{pd['split_cost_s']:.4g} s vs aggregated {pd['aggregated_cost_s']:.4g} s")


def wait_for(predicate, what, timeout=5.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    fail(what)


def main():
    # Children inherit a closed (null) stdin: cluster.Proc does not set one.
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    sims = []
    serve = None
    workdir = tempfile.TemporaryDirectory()
    try:
        prefill = Sim(BINARY, "p", nixl("kv_producer"))
        sims.append(prefill)
        for name in ("d0", "d1"):
            sims.append(Sim(BINARY, name, nixl("kv_consumer")))
        cfg = "listen: {host: 127.0.0.1, port: 0}\nworkers:\n"
        for s in sims:
            cfg += s.worker_yaml()
            cfg += "    role: %s\n    profile_speedup: %s\n" % (
                "prefill" if s.name == "p" else "decode", SPEEDUP)
        # Split every turn the decode worker would prefill anything of (Dynamo's rule, cap 0):
        # the test is about the exchange, not about when splitting pays. Health probes are
        # rare so that only the failing prefill legs eject the dead prefill worker.
        cfg += ("pd: {rule: dynamo_token_cap, token_cap: 0, prefill_timeout_ms: 5000}\n"
                "scrape_interval_s: 0.2\nhealth_interval_s: 60\n")
        path = os.path.join(workdir.name, "serve.yaml")
        with open(path, "w") as f:
            f.write(cfg)
        serve = Proc([BINARY, "serve", "--config", path, "--log-level", "warn"], SERVE_READY)
        port = int(serve.match.group(2))

        debug_route_shows_the_split(port, sims)
        n_split = run_clients(port, "split", sims)
        m = serve_metrics(port)
        split = metric_sum(m, "kvroute_pd_requests_total", placement="split")
        if split != n_split:
            fail(f"{split} requests split, the clients sent {n_split}")
        print(f"ok   all {n_split} conversation turns split (prefill on p, decode on d0/d1)")
        # Each decode worker that pulled taught its link from its sim's NIXL histograms.
        pulled = [d.name for d in sims[1:]
                  if metric_sum(d.metrics(), "vllm:nixl_xfer_time_seconds_count") > 0]
        wait_for(lambda: all(metric_sum(serve_metrics(port), "kvroute_kv_link_samples",
                                        worker=name) >= 1 for name in pulled),
                 f"links of {pulled} not learned from their pulls")
        m = serve_metrics(port)
        for name in pulled:
            if not metric_sum(m, "kvroute_kv_link_lane_bytes_per_s", worker=name) > 0:
                fail(f"{name}: learned link bandwidth is not positive")
        learned = ", ".join(
            "%s %.3g B/s per lane (%d samples)" % (
                name, metric_sum(m, "kvroute_kv_link_lane_bytes_per_s", worker=name),
                metric_sum(m, "kvroute_kv_link_samples", worker=name)) for name in pulled)
        print(f"ok   decode links learned from the sims' pulls: {learned}")
        wait_for(lambda: metric_sum(serve_metrics(port), "kvroute_worker_inflight_requests") == 0,
                 "bookings left on workers after every request ended")
        wait_for(lambda: metric_sum(prefill.metrics(), "kvroute:nixl_pinned_blocks") == 0,
                 "the prefill sim still pins blocks after every decode leg ended")
        print("ok   no booking left on any worker; no block left pinned on the prefill sim")

        # A decode sim killed between two turns (the clients kill it by the pid given them).
        retried = run_clients(port, "decode_retry", sims)
        # Each attempt's prefill leg is a split: the failed decode attempt's and the retry's.
        split_now = metric_sum(serve_metrics(port), "kvroute_pd_requests_total", placement="split")
        if split_now < n_split + retried + 1:
            fail(f"decode retry: {split_now - n_split} splits for {retried} requests and a retry")
        n_split = split_now
        sims = [s for s in sims if s.proc.p.poll() is None]
        if len(sims) != 2:
            fail("the decode_retry phase did not leave exactly p and one decode sim")
        wait_for(lambda: metric_sum(serve_metrics(port), "kvroute_worker_inflight_requests") == 0,
                 "bookings left on workers after the decode worker died")
        print("ok   no booking left after the decode leg failed and was placed again")

        prefill.proc.kill()  # SIGKILL by its pid
        n_after = run_clients(port, "fallback", sims)
        m = serve_metrics(port)
        fallbacks = metric_sum(m, "kvroute_pd_prefill_fallbacks_total")
        local = metric_sum(m, "kvroute_pd_requests_total", placement="local_fallback")
        aggregated = metric_sum(m, "kvroute_pd_requests_total", placement="aggregated")
        split_after = metric_sum(m, "kvroute_pd_requests_total", placement="split")
        if fallbacks < 1 or fallbacks != local:
            fail(f"prefill fallbacks {fallbacks}, local_fallback placements {local}")
        # Placements, not requests: the dead decode sim (not yet ejected) costs a retry too.
        if split_after != n_split or local + aggregated < n_after:
            fail(f"after the kill: split {split_after - n_split}, local {local}, "
                 f"aggregated {aggregated} of {n_after} requests")
        failed = metric_sum(m, "kvroute_requests_total", status="502") + \
            metric_sum(m, "kvroute_requests_total", status="503")
        if failed:
            fail(f"{failed} requests answered 5xx")
        wait_for(lambda: metric_sum(serve_metrics(port), "kvroute_worker_inflight_requests") == 0,
                 "bookings left on workers after the fallback requests")
        print(f"ok   prefill sim killed: {n_after} requests answered, {int(fallbacks)} decoded "
              f"locally after a failed prefill leg, {int(aggregated)} aggregated placements")
    finally:
        if serve:
            serve.kill()
        for s in sims:
            s.proc.kill()
        workdir.cleanup()


if __name__ == "__main__":
    main()

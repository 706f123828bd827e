"""InferenceObjective and InferenceModelRewrite discovery (src/k8s ObjectiveWatcher, run as
kvroute_k8s_objective_watch) against fake_api.py, a local HTTP server that replays
RECORDED-SHAPE Kubernetes API responses (recorded/inferenceobjectivelist.json,
inferencemodelrewritelist.json: hand-written in the shapes of llm-d.ai/v1alpha2 and
inference.networking.x-k8s.io/v1alpha2, not captured from a cluster). THIS IS A FAKE: no
Kubernetes API server can run on the machines this project is tested on. Checked:
  - objectives from llm-d.ai (the current group) and rewrites from the former
    inference.networking.x-k8s.io: both groups are read, each kind from whichever serves it;
  - only objects whose poolRef names this pool count (other-pools is left out);
  - rules in order with their weights (unset: 1), a catch-all rule (no matches) kept;
  - the two collections no CRD serves here answer 404: empty, asked again (not an error);
  - each list is followed by a watch from its resourceVersion with bookmarks allowed; ADDED,
    MODIFIED, DELETED, and a poolRef moved to another pool change the set handed on;
  - the bearer token on every request.

usage: objective_discovery_test.py KVROUTE_K8S_OBJECTIVE_WATCH RECORDED_DIR"""

import copy
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(__file__)
sys.path.insert(0, HERE)
from fake_api import FakeApi, inference_pool  # noqa: E402

tool, recorded = sys.argv[1], sys.argv[2]
NS = "/namespaces/llm/"
OBJECTIVES = "/apis/llm-d.ai/v1alpha2" + NS + "inferenceobjectives"
REWRITES = "/apis/inference.networking.x-k8s.io/v1alpha2" + NS + "inferencemodelrewrites"
ABSENT = ["/apis/llm-d.ai/v1alpha2" + NS + "inferencemodelrewrites",
          "/apis/inference.networking.x-k8s.io/v1alpha2" + NS + "inferenceobjectives"]

failures = 0


def check(name, cond, detail=""):
    global failures
    print(("ok   " if cond else "FAIL ") + name + ("" if cond else " " + str(detail)), flush=True)
    if not cond:
        failures += 1


def load(name):
    with open(os.path.join(recorded, name)) as f:
        return json.load(f)


objective_list = load("inferenceobjectivelist.json")
rewrite_list = load("inferencemodelrewritelist.json")
api = FakeApi("llm", inference_pool("qwen-pool", "llm", {"app": "vllm-qwen"}, 8000), [],
              collections={OBJECTIVES: {"kind": "InferenceObjectiveList", "items": objective_list["items"], "rv": "3000"},
                           REWRITES: {"kind": "InferenceModelRewriteList", "items": rewrite_list["items"], "rv": "4000"}})
work = tempfile.mkdtemp(prefix="kvroute-k8s-objectives-")
token = os.path.join(work, "token")
with open(token, "w") as f:
    f.write("objective-token\n")

lines, lock = [], threading.Lock()
proc = subprocess.Popen([tool, api.url, "llm", "qwen-pool", token], stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def reader():
    for line in proc.stdout:
        with lock:
            lines.append(line.rstrip("\n"))


threading.Thread(target=reader, daemon=True).start()


def wait_line(want, timeout=10):
    """The first output line equal to `want` (bounded); None when it never came."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        with lock:
            if want in lines:
                return want
        time.sleep(0.05)
    return None


def last(prefix):
    with lock:
        hits = [l for l in lines if l.startswith(prefix)]
    return hits[-1] if hits else None


def obj(name, priority, pool="qwen-pool", rv="3001"):
    o = copy.deepcopy(objective_list["items"][0])
    o["metadata"].update(name=name, resourceVersion=rv)
    o["spec"] = {"priority": priority, "poolRef": {"group": "inference.networking.k8s.io", "kind": "InferencePool",
                                                   "name": pool}}
    return o


try:
    check("list: llm-d.ai objectives of this pool, other-pools left out",
          wait_line("objectives llm-d.ai: batch=-1 chat=10"), last("objectives"))
    # By object name (the picker orders them by creationTimestamp: extproc/epp_policy.h).
    want_rules = ("rewrites inference.networking.x-k8s.io: generic-fallback#0[->Qwen/Qwen3-32B*1,] "
                  "small-canary#0[small-segment-lora,->small-segment-lora-v1*90,small-segment-lora-v2*10,]")
    check("list: x-k8s.io rewrite rules in order, unset weight 1, catch-all kept", wait_line(want_rules),
          last("rewrites inference"))
    for path in ABSENT:
        plural, group = path.rsplit("/", 1)[1], path.split("/")[2]
        check("not installed: %s.%s is 404, empty, not a failure" % (plural, group),
              wait_line("step %s.%s: not found: %s" % (plural, group, path)), [l for l in lines if "not found" in l][:4])

    # A watch on each served collection, from its list's resourceVersion, bookmarks allowed.
    deadline = time.time() + 10
    watches = []
    while time.time() < deadline and len(watches) < 2:
        watches = [q for p, q, _ in api.seen() if p in (OBJECTIVES, REWRITES) and q.get("watch") == "true"]
        time.sleep(0.05)
    check("watch from the list's resourceVersion, bookmarks allowed",
          sorted(q.get("resourceVersion") for q in watches[:2]) == ["3000", "4000"] and
          all(q.get("allowWatchBookmarks") == "true" for q in watches), watches)

    api.push_to(OBJECTIVES, "MODIFIED", obj("batch", -3, rv="3001"))
    check("watch MODIFIED: the new priority", wait_line("objectives llm-d.ai: batch=-3 chat=10"), last("objectives"))
    api.push_to(OBJECTIVES, "ADDED", obj("critical", 100, rv="3002"))
    check("watch ADDED", wait_line("objectives llm-d.ai: batch=-3 chat=10 critical=100"), last("objectives"))
    api.push_to(OBJECTIVES, "DELETED", obj("chat", 10, rv="3003"))
    check("watch DELETED", wait_line("objectives llm-d.ai: batch=-3 critical=100"), last("objectives"))
    api.push_to(OBJECTIVES, "MODIFIED", obj("critical", 100, pool="llama-pool", rv="3004"))
    check("poolRef moved to another pool: it leaves", wait_line("objectives llm-d.ai: batch=-3"), last("objectives"))
    gone = copy.deepcopy(rewrite_list["items"][1])
    gone["metadata"]["resourceVersion"] = "4001"
    api.push_to(REWRITES, "DELETED", gone)
    check("rewrite DELETED: its rule leaves", wait_line(
        "rewrites inference.networking.x-k8s.io: small-canary#0[small-segment-lora,->"
        "small-segment-lora-v1*90,small-segment-lora-v2*10,]"), last("rewrites inference"))

    # The 404 collections are asked again (not_found_backoff 0.5 s in the tool).
    time.sleep(1.5)
    for path in ABSENT:
        n = sum(1 for p, _, _ in api.seen() if p == path)
        check("not installed: %s asked again" % path.rsplit("/", 1)[1], n >= 2, n)
    auths = {a for p, _, a in api.seen()}
    check("the bearer token on every request", auths == {"Bearer objective-token"}, auths)
finally:
    proc.stdin.close()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)
    api.close()
    check("the watcher stopped cleanly", proc.returncode == 0, (proc.returncode, proc.stderr.read()[-500:]))

print("%d failures" % failures)
sys.exit(1 if failures else 0)

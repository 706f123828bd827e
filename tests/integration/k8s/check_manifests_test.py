#!/usr/bin/env python3
"""`kvroute config check --k8s` against the project's own manifests and broken copies of them.

No Kubernetes API server and no Envoy run here: the check reads files only. The good case is
deploy/'s two overlays as they are (exit 0, no errors) — which includes the `config` rule:
each `kvroute serve` container's mounted ConfigMap configuration, with the container's args,
passes serve's own flag parsing and validation, so the manifests say nothing serve refuses.
Each bad case copies deploy/ to a
temporary folder, changes one thing (the `old` text must occur exactly once in its file), and
expects exit status 2 with the finding naming the object and the field.

usage: check_manifests_test.py KVROUTE_BINARY DEPLOY_DIR
"""
import os
import shutil
import subprocess
import sys
import tempfile

KVROUTE, DEPLOY = sys.argv[1], sys.argv[2]

MODEL = "base/model-server.yaml"
POOL = "overlays/epp/inference-pool.yaml"
EPP = "overlays/epp/epp.yaml"
ENVOY = "overlays/epp/envoy.yaml"
GW = "overlays/standalone/gateway.yaml"
KV_LINE = ("            - '--kv-events-config={\"enable_kv_cache_events\": true, \"publisher\": \"zmq\", "
           "\"endpoint\": \"tcp://*:5557\", \"replay_endpoint\": \"tcp://*:5558\", \"topic\": \"kv\"}'\n")

# (name, overlay, file, old, new, expected substrings of the output); old and new may be tuples
# of several edits to the same file.
BAD = [
    ("drain: model server grace too short", "epp", MODEL,
     "terminationGracePeriodSeconds: 75", "terminationGracePeriodSeconds: 60",
     ["error [drain] StatefulSet/vllm", "spec.template.spec.terminationGracePeriodSeconds",
      "60 < preStop sleep 15 + --shutdown-timeout 45 + teardown buffer 15 = 75"]),
    ("drain: shutdown timeout raised without the grace", "standalone", MODEL,
     "--shutdown-timeout=45", "--shutdown-timeout=90",
     ["error [drain] StatefulSet/vllm", "75 < preStop sleep 15 + --shutdown-timeout 90"]),
    ("drain: picker drain timeout raised", "epp", EPP,
     "--drain-timeout=30", "--drain-timeout=45",
     ["error [drain] Deployment/kvroute-epp", "60 < preStop sleep 5 + --drain-timeout 45 + shutdown_grace_s 1 + teardown buffer 15 = 66"]),
    ("failure-mode: unset", "epp", POOL,
     "    failureMode: FailClose\n", "",
     ["error [failure-mode] InferencePool/qwen3-8b", "spec.endpointPickerRef.failureMode",
      "unset means FailClose"]),
    ("floating: latest image", "epp", MODEL,
     "image: vllm/vllm-openai:v0.10.1.1", "image: vllm/vllm-openai:latest",
     ["error [floating] StatefulSet/vllm", "spec.template.spec.containers[vllm].image", "'vllm/vllm-openai:latest'"]),
    ("floating: untagged image", "epp", ENVOY,
     "image: envoyproxy/envoy:v1.33.2", "image: envoyproxy/envoy",
     ["error [floating] Deployment/envoy", "has no tag (means latest)"]),
    ("floating: main tag", "standalone", GW,
     "image: ghcr.io/kvroute/kvroute:0.1.0", "image: ghcr.io/kvroute/kvroute:main",
     ["error [floating] Deployment/kvroute", "follows a branch"]),
    ("floating: bare major version label", "epp", EPP,
     "app.kubernetes.io/version: 0.1.0", "app.kubernetes.io/version: v0",
     ["error [floating] Deployment/kvroute-epp", "metadata.labels.app.kubernetes.io/version", "bare major"]),
    ("kv-events: picker precise, pool pods without events", "epp", MODEL, KV_LINE, "",
     ["error [kv-events] StatefulSet/vllm", "spec.template.spec.containers[vllm].args",
      "Deployment/kvroute-epp routes in precise mode"]),
    ("kv-events: standalone gateway precise, servers without events", "standalone", MODEL, KV_LINE, "",
     ["error [kv-events] StatefulSet/vllm", "Deployment/kvroute routes in precise mode"]),
    ("selector: pool matches no pod template", "epp", POOL,
     "kvroute.dev/role: model-server}", "kvroute.dev/role: server}",
     ["error [selector] InferencePool/qwen3-8b", "spec.selector.matchLabels",
      "matches no pod template in namespace 'kvroute'"]),
    # config: what kvroute serve itself would refuse, with the container's flags.
    ("config: a pool without the models its pods serve", "epp", EPP,
     "kubernetes: {pool: qwen3-8b, models: [Qwen/Qwen3-8B]}", "kubernetes: {pool: qwen3-8b}",
     ["error [config] Deployment/kvroute-epp", "spec.template.spec.containers[kvroute]",
      "discovery.kubernetes.models: at least one model name"]),
    ("config: --inference-pool with no discovery.kubernetes (issue 22's manifest bug)", "epp", EPP,
     ("    discovery:\n      kubernetes: {pool: qwen3-8b, models: [Qwen/Qwen3-8B]}\n", "- --epp\n"),
     ("", "- --epp\n            - --inference-pool=qwen3-8b\n"),
     ["error [config] Deployment/kvroute-epp", "discovery.kubernetes.models: at least one model name"]),
    ("config: an unknown key in the gateway's ConfigMap", "standalone", GW,
     "    failure_mode: fail_open\n", "    failure: fail_open\n",
     ["error [config] Deployment/kvroute", "failure: unknown key"]),
    ("config: a flag serve does not have", "standalone", GW,
     "args: [serve, --config=/etc/kvroute/kvroute.yaml, --drain-timeout=30]",
     "args: [serve, --config=/etc/kvroute/kvroute.yaml, --drain-timeout=30, --workers=2]",
     ["error [config] Deployment/kvroute", "flags:", "--workers"]),
    ("selector: service matches no pod template", "standalone", GW,
     "selector: {app.kubernetes.io/name: kvroute}", "selector: {app.kubernetes.io/name: kv-route}",
     ["error [selector] Service/kvroute", "spec.selector"]),
]

failures = []


def run(args, stdin=None):
    p = subprocess.run([KVROUTE, "config", "check", "--k8s"] + args, input=stdin,
                       capture_output=True, text=True, timeout=30)
    return p.returncode, p.stdout + p.stderr


def expect(name, cond, detail):
    print(("ok   " if cond else "FAIL ") + name)
    if not cond:
        failures.append(name)
        print("     " + detail.replace("\n", "\n     "))


for overlay in ("epp", "standalone"):
    rc, out = run([os.path.join(DEPLOY, "overlays", overlay)])
    expect(f"good: overlays/{overlay} exits 0", rc == 0 and " 0 errors" in out, f"rc={rc}\n{out}")

# The same objects as one rendered stream on stdin (the `kustomize build … |` path).
with tempfile.TemporaryDirectory() as tmp:
    text = ""
    for f in ("base/namespace.yaml", MODEL, POOL, EPP, ENVOY):
        text += open(os.path.join(DEPLOY, f)).read() + "\n---\n"
    rc, out = run(["-"], stdin=text)
    expect("good: rendered stream on stdin exits 0", rc == 0 and "13 objects checked: 0 errors" in out,
           f"rc={rc}\n{out}")

for name, overlay, rel, old, new, wanted in BAD:
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, "deploy")
        shutil.copytree(DEPLOY, copy)
        path = os.path.join(copy, rel)
        text = open(path).read()
        edits = list(zip(old, new)) if isinstance(old, tuple) else [(old, new)]
        drifted = [o for o, _ in edits if text.count(o) != 1]
        if drifted:
            expect(name, False, f"{rel}: {drifted[0]!r} does not occur exactly once (fixture drifted)")
            continue
        for o, n in edits:
            text = text.replace(o, n)
        open(path, "w").write(text)
        rc, out = run([os.path.join(copy, "overlays", overlay)])
        missing = [w for w in wanted if w not in out]
        expect(name, rc == 2 and not missing, f"rc={rc}, missing {missing}\n{out}")

# A kustomization that transforms its resources is refused, not checked unrendered.
with tempfile.TemporaryDirectory() as tmp:
    copy = os.path.join(tmp, "deploy")
    shutil.copytree(DEPLOY, copy)
    with open(os.path.join(copy, "overlays/epp/kustomization.yaml"), "a") as f:
        f.write("namePrefix: prod-\n")
    rc, out = run([os.path.join(copy, "overlays", "epp")])
    expect("transforming kustomization asks for rendered input", rc == 2 and "kustomize build" in out,
           f"rc={rc}\n{out}")

print(f"{len(failures)} failures")
sys.exit(1 if failures else 0)

// `kvroute serve --epp` with discovery.kubernetes, its InferenceObjective and
// InferenceModelRewrite objects read from the Kubernetes API: the API is
// tests/integration/k8s/fake_api.py, a local HTTP server answering in the API's list/watch
// shapes — A FAKE (no Kubernetes API server can run here) — whose one pod points at a real
// `kvroute sim`; @grpc/grpc-js plays the gateway (epp_harness.mjs). No Envoy runs here.
//   InferenceObjective (llm-d.ai): `batch` priority -1 exists only in the cluster, `chat`
//   is -1 in epp.objectives but 5 in the cluster. With epp.saturation.queue_depth 0 every
//   worker counts as saturated, so a sheddable request is always answered 429: batch → 429
//   (the cluster's priority applies), chat → routed (the cluster's overrides the config's);
//   a MODIFIED event making batch 3 → routed.
//   InferenceModelRewrite (inference.networking.x-k8s.io): `sim-alias` → sim-model; the body
//   the picker hands back carries "model": "sim-model" and the sim answers as it; a DELETED
//   event → sim-alias is unknown again (404).
//
// usage: node epp_k8s_test.mjs KVROUTE_BINARY SOURCE_DIR
import { spawn } from 'node:child_process';
import path from 'node:path';
import { checker, loadProtos, routeAndRelay, sleep } from './epp_harness.mjs';

const [binary, src] = process.argv.slice(2);
const { grpc, extproc } = loadProtos(src);

const { check, finish } = checker();

const OBJECTIVES = '/apis/llm-d.ai/v1alpha2/namespaces/llm/inferenceobjectives';
const REWRITES = '/apis/inference.networking.x-k8s.io/v1alpha2/namespaces/llm/inferencemodelrewrites';
const poolRef = { group: 'inference.networking.k8s.io', kind: 'InferencePool', name: 'qwen-pool' };
const objective = (name, priority, rv) => ({ apiVersion: 'llm-d.ai/v1alpha2', kind: 'InferenceObjective',
  metadata: { name, namespace: 'llm', resourceVersion: rv, creationTimestamp: '2026-11-30T09:05:00Z' },
  spec: { priority, poolRef } });
const alias = { apiVersion: 'inference.networking.x-k8s.io/v1alpha2', kind: 'InferenceModelRewrite',
  metadata: { name: 'alias', namespace: 'llm', resourceVersion: '4001', creationTimestamp: '2026-11-30T09:10:00Z' },
  spec: { poolRef, rules: [{ matches: [{ model: { type: 'Exact', value: 'sim-alias' } }], targets: [{ modelRewrite: 'sim-model' }] }] } };

// The sim, the fake API and serve, in Python (the project's fake and process helpers); events
// to push arrive on stdin as JSON lines [path, type, object]; stdin closed → all stopped.
const harness = spawn('/usr/bin/python3', ['-c', `
import json, os, re, sys, tempfile
sys.path.insert(0, ${JSON.stringify(path.join(src, 'tests/integration/gateway'))})
sys.path.insert(0, ${JSON.stringify(path.join(src, 'tests/integration/k8s'))})
from cluster import Proc, SIM_READY, SERVE_READY
from fake_api import FakeApi, inference_pool, pod
binary, collections = sys.argv[1], json.loads(sys.argv[2])
sim = Proc([binary, "sim", "--host", "127.0.0.1", "--port", "0", "--served-model-name", "sim-model", "--speedup", "50",
            "--kv-events-endpoint", "tcp://127.0.0.1:*"], SIM_READY)
serve, api = None, None
try:
    sim_port = int(sim.match.group(2))
    labels = {"app": "vllm-qwen"}
    api = FakeApi("llm", inference_pool("qwen-pool", "llm", labels, sim_port), [pod("vllm-a", "127.0.0.1", 990, labels)],
                  collections=collections)
    cfg = os.path.join(tempfile.mkdtemp(prefix="kvroute-epp-k8s-"), "serve.yaml")
    with open(cfg, "w") as f:
        f.write("listen: {host: 127.0.0.1, port: 0}\\nmode: approximate\\nscrape_interval_s: 0.2\\nhealth_interval_s: 0.3\\n"
                "shutdown_grace_s: 0\\ndiscovery:\\n  kubernetes: {pool: qwen-pool, namespace: llm, api_url: '%s', models: [sim-model]}\\n"
                "epp: {objectives: {chat: -1}, saturation: {queue_depth: 0, metrics_max_age_s: 5}}\\n" % api.url)
    serve = Proc([binary, "serve", "--config", cfg, "--log-level", "info", "--epp", "127.0.0.1:0"], SERVE_READY)
    epp = re.search(rb"epp listening on (\\S+):(\\d+)", serve.match.string)
    print("CLUSTER " + json.dumps({"http": int(serve.match.group(2)), "epp": int(epp.group(2)), "sim": sim_port}), flush=True)
    for line in sys.stdin:
        p, kind, obj = json.loads(line)
        api.push_to(p, kind, obj)
finally:
    if serve:
        sys.stderr.write(serve.stderr()[-3000:] if os.environ.get("KVROUTE_TEST_VERBOSE") else "")
        serve.kill()
    sim.kill()
    if api:
        api.close()
`, binary, JSON.stringify({
  [OBJECTIVES]: { kind: 'InferenceObjectiveList', rv: '3000', items: [objective('batch', -1, '2990'), objective('chat', 5, '2991')] },
  [REWRITES]: { kind: 'InferenceModelRewriteList', rv: '4000', items: [alias] },
})], { stdio: ['pipe', 'pipe', 'inherit'] });
const info = await new Promise((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error('cluster not ready')), 60000);
  let out = '';
  harness.stdout.on('data', (d) => {
    out += d;
    const m = out.match(/CLUSTER (\{.*\})\n/);
    if (m) { clearTimeout(timer); resolve(JSON.parse(m[1])); }
  });
  harness.on('exit', (code) => reject(new Error(`harness exited ${code}`)));
});
const push = (p, kind, obj) => harness.stdin.write(JSON.stringify([p, kind, obj]) + '\n');

const answeredModel = (sent) => {
  const line = (sent || '').split('\n').find((l) => l.startsWith('data: {'));
  return line ? JSON.parse(line.slice(6)).model : null;
};
// Retries (bounded) until `ok` holds of the result: the pod joining, a watch event arriving.
async function until(fn, ok, ms = 10000) {
  let r = null;
  for (const end = Date.now() + ms; Date.now() < end;) {
    r = await fn();
    if (ok(r)) return r;
    await sleep(100);
  }
  return r;
}
const show = (x) => String(JSON.stringify(x)).slice(0, 300);
const code = (r) => r.immediate?.immediate_response?.status?.code;
const errorOf = (r) => { try { return JSON.parse(Buffer.from(r.immediate.immediate_response.body).toString()).error; } catch { return null; } };

try {
  const client = new extproc.envoy.service.ext_proc.v3.ExternalProcessor(`127.0.0.1:${info.epp}`, grpc.credentials.createInsecure());
  const body = (model, content) => ({ model, stream: true, max_tokens: 4, messages: [{ role: 'user', content }] });
  const withObjective = (o) => ({ extraHeaders: [['x-gateway-inference-objective', o]] });

  // The pool's pod joins through discovery; the rewrite rule arrives through its own watch.
  const aliased = await until(() => routeAndRelay(client, body('sim-alias', 'aliased')), (r) => r.set);
  check('InferenceModelRewrite: sim-alias routed to the pool\'s pod', aliased.set && aliased.dest === `127.0.0.1:${info.sim}`,
        show(aliased.immediate || aliased.lb));
  check('InferenceModelRewrite: the body handed back says sim-model, the sim answers as it',
        aliased.set && JSON.parse(aliased.forwarded).model === 'sim-model' && answeredModel(aliased.sent) === 'sim-model' &&
        aliased.set['content-length'] === String(Buffer.byteLength(aliased.forwarded)), aliased.forwarded);

  // (Bounded retry: the objectives' list is read on its own thread; until it is in, batch is 0.)
  const batch = await until(() => routeAndRelay(client, body('sim-model', 'batch'), withObjective('batch')),
                            (r) => code(r) === 'TooManyRequests', 5000);
  check('InferenceObjective batch (-1, only in the cluster): 429 in a saturated pool', code(batch) === 'TooManyRequests' &&
        errorOf(batch)?.code === 'sheddable_request_shed', show(batch.immediate || batch.lb));
  const chat = await routeAndRelay(client, body('sim-model', 'chat'), withObjective('chat'));
  check('InferenceObjective chat (5 in the cluster, -1 in the config): routed', chat.set && chat.status === 200,
        show(chat.immediate || chat.status));

  push(OBJECTIVES, 'MODIFIED', objective('batch', 3, '3001'));
  const later = await until(() => routeAndRelay(client, body('sim-model', 'batch again'), withObjective('batch')), (r) => r.set);
  check('watch MODIFIED batch → 3: routed', later.set && later.status === 200, show(later.immediate));

  push(REWRITES, 'DELETED', { ...alias, metadata: { ...alias.metadata, resourceVersion: '4002' } });
  const gone = await until(() => routeAndRelay(client, body('sim-alias', 'no alias')), (r) => code(r) === 'NotFound');
  check('watch DELETED rewrite: sim-alias is unknown again (404)', code(gone) === 'NotFound' &&
        errorOf(gone)?.code === 'model_not_found', show(gone.immediate || gone.lb));
} catch (e) {
  check('exception', false, e.stack);
} finally {
  harness.stdin.end();
  await new Promise((resolve) => {
    const t = setTimeout(() => { harness.kill('SIGKILL'); resolve(); }, 20000);
    harness.on('exit', () => { clearTimeout(t); resolve(); });
  });
}
finish();

// Shared by the Node ext_proc tests (epp_server_test against the fixed test server, the
// `kvroute serve --epp` tests): loadProtos, openStream and the message helpers play Envoy; for
// serve --epp, startEppCluster starts two `kvroute sim` processes behind
// `kvroute serve --epp 127.0.0.1:0` (tests/integration/gateway/cluster.py, which stops what it
// started by pid when its stdin closes), loads the ext_proc and health protos with the official
// @grpc/proto-loader, and plays Envoy's side of one ext_proc stream with @grpc/grpc-js.
// No Envoy runs here (none can be installed on these machines).
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';

export function loadProtos(src) {
  const require = createRequire(path.join(src, 'package.json'));
  const grpc = require('@grpc/grpc-js');
  const protoLoader = require('@grpc/proto-loader');
  const opts = { keepCase: true, longs: String, enums: String, defaults: false, oneofs: true };
  const extproc = grpc.loadPackageDefinition(protoLoader.loadSync('envoy/service/ext_proc/v3/external_processor.proto',
    { ...opts, includeDirs: [path.join(src, 'src/extproc/proto')] }));
  const health = grpc.loadPackageDefinition(protoLoader.loadSync('health.proto',
    { ...opts, includeDirs: [path.join(src, 'tests/integration/extproc')] }));
  return { grpc, extproc, health };
}

// {http, epp, sims: [{name, port}], stop()}. `simArgs`: extra `kvroute sim` flags; `speedup`:
// the sims' (50 unless a test needs requests that last); `simModels`: per sim, the LoRA adapter
// names it serves besides sim-model (cluster.py's sim_models).
export async function startEppCluster(binary, src, extraYaml = '', { simArgs = [], speedup = 50, simModels = null } = {}) {
  const harness = spawn('/usr/bin/python3', ['-c', `
import json, re, sys
sys.path.insert(0, ${JSON.stringify(path.join(src, 'tests/integration/gateway'))})
from cluster import Cluster
with Cluster(sys.argv[1], n=2, speedup=float(sys.argv[3]), sim_extra=json.loads(sys.argv[4]),
             serve_args=["--epp", "127.0.0.1:0"], extra_yaml=sys.argv[2],
             sim_models=json.loads(sys.argv[5])) as c:
    epp = re.search(rb"epp listening on (\\S+):(\\d+)", c.serve.match.string)
    print("CLUSTER " + json.dumps({"http": c.port, "epp": int(epp.group(2)) if epp else 0,
                                   "sims": [{"name": s.name, "port": s.port} for s in c.sims], "serve_pid": c.serve.p.pid}), flush=True)
    sys.stdin.read()
`, binary, extraYaml, String(speedup), JSON.stringify(simArgs), JSON.stringify(simModels)], { stdio: ['pipe', 'pipe', 'inherit'] });
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
  info.stop = () => {
    harness.stdin.end();
    return new Promise((resolve) => {
      const t = setTimeout(() => { harness.kill('SIGKILL'); resolve(); }, 20000);
      harness.on('exit', () => { clearTimeout(t); resolve(); });
    });
  };
  return info;
}

// One ext_proc stream: queued responses, next() with a bound, the end as a promise.
export function openStream(client) {
  const call = client.Process();
  const queue = [], waiters = [];
  let ended = false;
  call.on('data', (m) => (waiters.length ? waiters.shift()(m) : queue.push(m)));
  const done = new Promise((resolve) => { call.on('end', () => { ended = true; resolve(); }); call.on('error', resolve); });
  return {
    send: (m) => call.write(m),
    next: (ms = 10000) => queue.length ? Promise.resolve(queue.shift()) : new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error('no response')), ms);
      waiters.push((m) => { clearTimeout(t); resolve(m); });
    }),
    pending: () => queue.length,
    end: () => call.end(),
    cancel: () => call.cancel(),
    done, isEnded: () => ended,
  };
}

export const hdrs = (pairs, eos) => ({ headers: { headers: pairs.map(([k, v]) => ({ key: k, raw_value: Buffer.from(v) })) }, end_of_stream: eos });
export const setHeaders = (m) => Object.fromEntries(m.request_headers.response.header_mutation.set_headers
  .map((o) => [o.header.key, Buffer.from(o.header.raw_value).toString()]));
export const lbOf = (m) => m.dynamic_metadata.fields['envoy.lb'].structValue.fields['x-gateway-destination-endpoint'].stringValue;
export const streamed = (m, side) => m[side].response.body_mutation.streamed_response;
export const hint = (v) => ({ filter_metadata: { 'envoy.lb.subset_hint': { fields: { 'x-gateway-destination-endpoint-subset': v } } } });
export const served = (ep) => ({ filter_metadata: { 'envoy.lb': { fields: { 'x-gateway-destination-endpoint-served': { stringValue: ep } } } } });

// Prometheus text → sum of the samples of `name` whose labels include `labels`.
// What every picker test prints and counts: an "ok"/"FAIL" line per check; `finish()` prints
// the count and exits 1 on any failure.
export function checker() {
  let failures = 0;
  const check = (name, cond, detail = '') => {
    console.log(`${cond ? 'ok  ' : 'FAIL'} ${name}${cond ? '' : ' ' + detail}`);
    if (!cond) failures++;
  };
  const finish = () => {
    console.log(`${failures} failures`);
    process.exit(failures ? 1 : 0);
  };
  return { check, finish };
}
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export const httpText = async (port, p) => (await fetch(`http://127.0.0.1:${port}${p}`)).text();

export function metricSum(text, name, labels = {}) {
  let total = 0;
  for (const line of text.split('\n')) {
    const m = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/);
    if (!m || m[1] !== name) continue;
    const have = Object.fromEntries([...(m[3] || '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) total += Number(m[4]);
  }
  return total;
}

// Envoy's side of one routed chat request through the picker, then the HTTP exchange with the
// endpoint it named (as Envoy's ORIGINAL_DST cluster would), the response streamed back through
// the picker chunk by chunk, then response trailers. Returns what happened.
export async function routeAndRelay(client, body, { extraHeaders = [], metadata, cut = 17, useFallback = false } = {}) {
  const s = openStream(client);
  const text = JSON.stringify(body);
  const first = { request_headers: hdrs([[':method', 'POST'], [':path', '/v1/chat/completions'],
    ['content-type', 'application/json'], ...extraHeaders], false),
    protocol_config: { request_body_mode: 'FULL_DUPLEX_STREAMED', response_body_mode: 'FULL_DUPLEX_STREAMED' } };
  if (metadata) first.metadata_context = metadata;
  s.send(first);
  s.send({ request_body: { body: Buffer.from(text.slice(0, cut)), end_of_stream: false } });
  s.send({ request_body: { body: Buffer.from(text.slice(cut)), end_of_stream: true } });
  const h = await s.next();
  if (h.response !== 'request_headers') {
    await s.done;
    return { immediate: h, ended: s.isEnded() };
  }
  const set = setHeaders(h);
  let forwarded = '';
  for (;;) {
    const b = await s.next();
    const sr = streamed(b, 'request_body');
    forwarded += Buffer.from(sr.body || []).toString();
    if (sr.end_of_stream) break;
  }
  const destinations = set['x-gateway-destination-endpoint'].split(',');
  const dest = useFallback ? destinations[1] : destinations[0];
  const res = await fetch(`http://${dest}/v1/chat/completions`, { method: 'POST', body: forwarded,
    headers: { 'content-type': 'application/json' } });
  s.send({ response_headers: hdrs([[':status', String(res.status)], ['content-type', res.headers.get('content-type') || '']], false),
           metadata_context: served(dest) });
  const rh = await s.next();
  const echoes = [];
  let sent = '', echoed = '';
  for await (const chunk of res.body) {
    const piece = Buffer.from(chunk);
    sent += piece.toString();
    s.send({ response_body: { body: piece, end_of_stream: false } });
    const e = await s.next();
    echoes.push(e);
    echoed += Buffer.from(streamed(e, 'response_body').body || []).toString();
  }
  s.send({ response_body: { body: Buffer.alloc(0), end_of_stream: true } });
  const last = await s.next();
  s.send({ response_trailers: { trailers: { headers: [] } } });
  const tr = await s.next();
  s.end();
  await s.done;
  let content = '', usage = null;
  for (const line of sent.split('\n')) {
    if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
    const ev = JSON.parse(line.slice(6));
    if (ev.usage) usage = ev.usage;
    for (const c of ev.choices || []) content += c.delta?.content || '';
  }
  return { headersResponse: h, set, lb: lbOf(h), forwarded, destinations, dest, status: res.status,
           responseHeaders: rh, echoes, sent, echoed, last, trailers: tr, content, usage, ended: s.isEnded() };
}

// The picker's request headers (Endpoint Picker protocol, reference §5) against
// `kvroute serve --epp` in front of two `kvroute sim`s, @grpc/grpc-js playing the gateway
// (epp_harness.mjs), conformance-style:
//   x-gateway-inference-objective → priority from epp.objectives (batch: -1, chat: 10);
//   a sheddable request (priority < 0) is answered ImmediateResponse 429 with OpenAI's error
//   body when every candidate is saturated, and nothing is booked;
//   a critical (chat) and a default (no objective) request are routed all the same;
//   once the load is gone the sheddable request is routed again.
// Saturation is made for real: each sim runs one sequence at a time (--max-num-seqs 1, real
// time) and is sent three 300-token completions directly, so kvroute's scrape of its /metrics shows
// requests waiting (epp.saturation.queue_depth: 1). No Envoy runs here.
//
// usage: node epp_objective_test.mjs KVROUTE_BINARY SOURCE_DIR
import { checker, hdrs, httpText, loadProtos, metricSum, openStream, sleep, startEppCluster } from './epp_harness.mjs';

const [binary, src] = process.argv.slice(2);
const { grpc, extproc } = loadProtos(src);

const { check, finish } = checker();
const text = httpText;

// One request through the picker, up to its first answer (headers response or immediate).
async function pick(client, objective, content) {
  const s = openStream(client);
  const extra = objective ? [['x-gateway-inference-objective', objective], ['x-gateway-inference-fairness-id', 'tenant-a']] : [];
  const body = JSON.stringify({ model: 'sim-model', max_tokens: 4, messages: [{ role: 'user', content }] });
  s.send({ request_headers: hdrs([[':method', 'POST'], [':path', '/v1/chat/completions'],
    ['content-type', 'application/json'], ...extra], false),
    protocol_config: { request_body_mode: 'FULL_DUPLEX_STREAMED', response_body_mode: 'FULL_DUPLEX_STREAMED' } });
  s.send({ request_body: { body: Buffer.from(body), end_of_stream: true } });
  const first = await s.next();
  s.cancel();  // the gateway never sends it on: whatever was booked is released
  await s.done;
  return first;
}

const cluster = await startEppCluster(binary, src,
  'epp: {objectives: {batch: -1, chat: 10}, saturation: {queue_depth: 1, kv_usage: 0.99, metrics_max_age_s: 5}}\n',
  { simArgs: ['--max-num-seqs', '1'], speedup: 1 });
const load = new AbortController();
try {
  const client = new extproc.envoy.service.ext_proc.v3.ExternalProcessor(`127.0.0.1:${cluster.epp}`,
    grpc.credentials.createInsecure());

  // Idle: every objective is routed. (kvroute scrapes every 0.2 s; a worker without a scrape
  // younger than metrics_max_age_s would count as saturated.)
  await sleep(1000);
  const idle = await pick(client, 'batch', 'idle pool');
  check('idle pool: a sheddable request is routed', idle.response === 'request_headers', idle.response);

  // Saturate both sims: one running, two waiting each, sent straight to them.
  const pending = [];
  for (const s of cluster.sims) {
    for (let i = 0; i < 3; i++) {
      pending.push(fetch(`http://127.0.0.1:${s.port}/v1/completions`, { method: 'POST', signal: load.signal,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'sim-model', prompt: `load ${s.name} ${i} `.repeat(50), max_tokens: 300 }) })
        .then((r) => r.text()).catch(() => null));
    }
  }
  // Wait until kvroute's scrape of each sim shows a queue (bounded).
  const simWaiting = async () => {
    let n = 0;
    for (const s of cluster.sims) n += (metricSum(await text(s.port, '/metrics'), 'vllm:num_requests_waiting') >= 1) ? 1 : 0;
    return n;
  };
  let ready = false;
  for (let t = 0; t < 100 && !ready; t++) { ready = (await simWaiting()) === cluster.sims.length; if (!ready) await sleep(50); }
  check('both sims report requests waiting', ready);
  await sleep(600);  // a scrape (every 0.2 s) after the queues formed

  const shed = await pick(client, 'batch', 'shed me');
  const ir = shed.immediate_response;
  let errorBody = null;
  try { errorBody = JSON.parse(Buffer.from(ir?.body || []).toString()); } catch { /* checked below */ }
  check('saturated pool: the sheddable request gets ImmediateResponse 429',
        shed.response === 'immediate_response' && ir.status.code === 'TooManyRequests', JSON.stringify(shed).slice(0, 300));
  check('429 body is an OpenAI error naming the objective',
        errorBody?.error?.type === 'rate_limit_error' && errorBody.error.code === 'sheddable_request_shed' &&
        errorBody.error.message.includes("'batch'") && errorBody.error.message.includes('saturated'),
        JSON.stringify(errorBody));
  const critical = await pick(client, 'chat', 'critical while saturated');
  check('saturated pool: a critical (priority 10) request is routed', critical.response === 'request_headers', critical.response);
  const plain = await pick(client, null, 'no objective while saturated');
  check('saturated pool: a request without an objective (priority 0) is routed', plain.response === 'request_headers', plain.response);
  const unknown = await pick(client, 'unlisted', 'unknown objective while saturated');
  check('saturated pool: an unknown objective counts as priority 0', unknown.response === 'request_headers', unknown.response);

  // The load finishes (about 3 s a request, measured: a sim at real time, one sequence);
  // once a scrape shows room the sheddable request is routed again.
  await Promise.all(pending);
  let routed = null;
  for (let t = 0; t < 100; t++) {
    if ((await simWaiting()) === 0) {
      await sleep(600);
      routed = await pick(client, 'batch', 'after the load');
      if (routed.response === 'request_headers') break;
    }
    await sleep(100);
  }
  check('after the load: the sheddable request is routed again', routed?.response === 'request_headers', routed?.response);
  // The gateway's cancel reaches kvroute's stream handler after the client side has closed,
  // so the last booking is released a moment later: wait for it (bounded, 5 s).
  let inflight = -1;
  for (let t = 0; t < 50 && inflight !== 0; t++) {
    inflight = metricSum(await text(cluster.http, '/metrics'), 'kvroute_worker_inflight_requests');
    if (inflight !== 0) await sleep(100);
  }
  check('nothing left booked in flight', inflight === 0, String(inflight));
} catch (e) {
  check('exception', false, e.stack);
} finally {
  load.abort();
  await cluster.stop();
}
finish();

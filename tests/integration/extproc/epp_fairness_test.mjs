// The fairness rule for x-gateway-inference-fairness-id (extproc/epp_fairness.h) against
// `kvroute serve --epp` in front of two `kvroute sim`s, @grpc/grpc-js playing the gateway
// (epp_harness.mjs). Streams are held open after their pick, so the picker counts them in
// flight; the rule only rations a saturated pool, among requests of one priority:
//   idle pool: tenant a holds 4, tenant b 1 — all routed (room: no rationing);
//   saturated (each sim runs one sequence at real time and is sent six 300-token completions
//   directly, so its scrape shows requests waiting; epp.saturation.queue_depth: 1):
//     a (4 of 5 in flight, share 2.5) → ImmediateResponse 429, code fairness_share_exceeded,
//     OpenAI's error body naming the fairness id; b (within its share), a newcomer c and a
//     request without a fairness id (the default flow) → routed;
//     three of a's streams end → a's next request is routed again;
//   every stream ended → nothing left booked in flight.
// No Envoy runs here.
//
// usage: node epp_fairness_test.mjs KVROUTE_BINARY SOURCE_DIR
import { checker, hdrs, httpText, loadProtos, metricSum, openStream, sleep, startEppCluster } from './epp_harness.mjs';

const [binary, src] = process.argv.slice(2);
const { grpc, extproc } = loadProtos(src);

const { check, finish } = checker();
const text = httpText;

// One request through the picker up to its first answer; the stream stays open (held in
// flight) when it was routed, and is closed when it was answered at once.
let serial = 0;
async function hold(client, tenant) {
  const s = openStream(client);
  const extra = tenant === null ? [] : [['x-gateway-inference-fairness-id', tenant]];
  const body = JSON.stringify({ model: 'sim-model', max_tokens: 4, messages: [{ role: 'user', content: `held ${serial++}` }] });
  s.send({ request_headers: hdrs([[':method', 'POST'], [':path', '/v1/chat/completions'],
    ['content-type', 'application/json'], ...extra], false),
    protocol_config: { request_body_mode: 'FULL_DUPLEX_STREAMED', response_body_mode: 'FULL_DUPLEX_STREAMED' } });
  s.send({ request_body: { body: Buffer.from(body), end_of_stream: true } });
  const first = await s.next();
  if (first.response === 'request_headers') {
    await s.next();  // the body chunk (one: the body is small)
  } else {
    await s.done;
  }
  return { first, routed: first.response === 'request_headers', release: async () => { s.cancel(); await s.done; } };
}

const cluster = await startEppCluster(binary, src,
  'epp: {saturation: {queue_depth: 1, kv_usage: 0.99, metrics_max_age_s: 5}}\n',
  { simArgs: ['--max-num-seqs', '1'], speedup: 1 });
const load = new AbortController();
const held = [];
try {
  const client = new extproc.envoy.service.ext_proc.v3.ExternalProcessor(`127.0.0.1:${cluster.epp}`,
    grpc.credentials.createInsecure());
  await sleep(1000);  // a fresh scrape of each sim (every 0.2 s)

  // Idle pool: whoever holds what, everything is routed.
  const a = [];
  for (let i = 0; i < 3; i++) a.push(await hold(client, 'a'));
  const b = [await hold(client, 'b')];
  a.push(await hold(client, 'a'));
  held.push(...a, ...b);
  check('idle pool: a holds 4 and b 1, all routed (no rationing with room)', [...a, ...b].every((h) => h.routed),
        [...a, ...b].map((h) => h.first.response).join());

  // Saturate both sims, straight to them.
  const pending = [];
  for (const s of cluster.sims) {
    for (let i = 0; i < 6; i++) {
      pending.push(fetch(`http://127.0.0.1:${s.port}/v1/completions`, { method: 'POST', signal: load.signal,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'sim-model', prompt: `load ${s.name} ${i} `.repeat(50), max_tokens: 300 }) })
        .then((r) => r.text()).catch(() => null));
    }
  }
  let ready = false;
  for (let t = 0; t < 100 && !ready; t++) {
    let n = 0;
    for (const s of cluster.sims) n += metricSum(await text(s.port, '/metrics'), 'vllm:num_requests_waiting') >= 1 ? 1 : 0;
    ready = n === cluster.sims.length;
    if (!ready) await sleep(50);
  }
  check('both sims report requests waiting', ready);
  await sleep(600);  // a scrape after the queues formed

  const over = await hold(client, 'a');
  held.push(over);  // (released at the end should it have been routed)
  const ir = over.first.immediate_response;
  let err = null;
  try { err = JSON.parse(Buffer.from(ir?.body || []).toString()); } catch { /* checked below */ }
  check('saturated: a (4 of 5 in flight, share 2.5) gets ImmediateResponse 429',
        !over.routed && ir?.status?.code === 'TooManyRequests', JSON.stringify(over.first).slice(0, 300));
  check('429 body: rate_limit_error, fairness_share_exceeded, naming the id', err?.error?.type === 'rate_limit_error' &&
        err.error.code === 'fairness_share_exceeded' && err.error.message.includes("'a'"), JSON.stringify(err));
  const b2 = await hold(client, 'b');
  held.push(b2);
  check('saturated: b, within its share, is routed', b2.routed, b2.first.response);
  const c = await hold(client, 'c');
  held.push(c);
  check('saturated: a newcomer c is routed', c.routed, c.first.response);
  const anon = await hold(client, null);
  held.push(anon);
  check('saturated: a request without a fairness id (the default flow) is routed', anon.routed, anon.first.response);

  // Three of a's streams end: a holds 1 of 5 (share 1.25) and is routed again. The release
  // reaches the server's stream thread a moment after the client closes: retry (bounded).
  for (const h of a.slice(0, 3)) await h.release();
  let again = null;
  for (let t = 0; t < 50; t++) {
    again = await hold(client, 'a');
    if (again.routed) break;
    await sleep(100);
  }
  held.push(again);
  check('after three of its requests end, a is routed again', again?.routed, again?.first.response);
} catch (e) {
  check('exception', false, e.stack);
} finally {
  for (const h of held) if (h.routed) await h.release().catch(() => null);
  let inflight = -1;
  try {
    for (let t = 0; t < 50 && inflight !== 0; t++) {
      inflight = metricSum(await text(cluster.http, '/metrics'), 'kvroute_worker_inflight_requests');
      if (inflight !== 0) await sleep(100);
    }
  } catch (e) { inflight = e.message; }
  check('every stream ended: nothing left booked in flight', inflight === 0, String(inflight));
  load.abort();
  await cluster.stop();
}
finish();

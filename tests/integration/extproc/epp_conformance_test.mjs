// The Gateway API Inference Extension's conformance cases that apply to an Endpoint Picker
// (../shared/reference/traces-and-k8s.md §8), written as tests against `kvroute serve --epp`
// in front of two `kvroute sim` processes, with @grpc/grpc-js playing the gateway. The real
// suite (conformance/, `go test`) needs a Kubernetes cluster and a Gateway implementation and
// tests the data plane, so it cannot run here; these are the picker's side of its cases:
//
//   GatewayFollowingEPPRouting         the destination list names pool endpoints, identical in
//                                      the header and envoy.lb metadata, and the request sent
//                                      there is served (the HTTP exchange is done for real)
//   GatewayDestinationEndpointServed   the gateway reports it served a fallback: kvroute books
//                                      the request on the served worker, not on its pick
//   subset hint (protocol MUST)        honoured; present but empty, or naming no pool endpoint: 503
//   no body (headers end_of_stream)    GET: picked at the headers, no Content-Length; POST to
//                                      an inference path: 400
//   large body                         ≤ 62,000-byte chunks, the last with end_of_stream,
//                                      Content-Length of the whole
//   client errors                      ImmediateResponse with the status (400, 404) and
//                                      OpenAI's error body; no worker sees them
//   gateway gone mid-response          the booking is released (nothing left in flight)
//   EppUnAvailableFailOpen (picker's side) health: liveness, readiness and the ext_proc service
//                                      SERVING; after SIGTERM readiness and the ext_proc service
//                                      report NOT_SERVING (the gateway's health check moves
//                                      away; the pool's failureMode decides the rest)
// No Envoy runs here (none can be installed on these machines).
//
// usage: node epp_conformance_test.mjs KVROUTE_BINARY SOURCE_DIR
import { loadProtos, startEppCluster, routeAndRelay, openStream, hdrs, setHeaders, lbOf, streamed, hint, served, metricSum, checker, httpText }
  from './epp_harness.mjs';

const [binary, src] = process.argv.slice(2);
const { grpc, extproc, health } = loadProtos(src);

const { check, finish } = checker();
const text = httpText;
const chat = (content, extra = {}) => ({ model: 'sim-model', stream: true, max_tokens: 4,
  stream_options: { include_usage: true }, messages: [{ role: 'user', content }], ...extra });

const cluster = await startEppCluster(binary, src, 'shutdown_grace_s: 3\n');
try {
  const addr = `127.0.0.1:${cluster.epp}`;
  const client = new extproc.envoy.service.ext_proc.v3.ExternalProcessor(addr, grpc.credentials.createInsecure());
  const hc = new health.grpc.health.v1.Health(addr, grpc.credentials.createInsecure());
  const healthOf = (svc) => new Promise((res) => hc.Check({ service: svc }, (err, out) => res(err ? `error ${err.code}` : out.status)));
  const pool = cluster.sims.map((s) => `127.0.0.1:${s.port}`);
  const nameOf = Object.fromEntries(cluster.sims.map((s) => [`127.0.0.1:${s.port}`, s.name]));
  const requestsOf = async (worker) => metricSum(await text(cluster.http, '/metrics'), 'kvroute_requests_total', { worker });
  const inflight = async () => metricSum(await text(cluster.http, '/metrics'), 'kvroute_worker_inflight_requests');

  for (const svc of ['liveness', 'readiness', 'envoy.service.ext_proc.v3.ExternalProcessor']) {
    check(`health ${svc}: SERVING`, (await healthOf(svc)) === 'SERVING');
  }

  // GatewayFollowingEPPRouting.
  const r = await routeAndRelay(client, chat('Following the picker. '.repeat(10)));
  check('FollowingEPPRouting: every destination is a pool endpoint', r.destinations.every((d) => pool.includes(d)), r.lb);
  check('FollowingEPPRouting: header == envoy.lb metadata', r.lb === r.set['x-gateway-destination-endpoint']);
  check('FollowingEPPRouting: the named endpoint served it', r.status === 200 && r.usage?.completion_tokens > 0, String(r.status));

  // GatewayDestinationEndpointServed: the gateway used the fallback.
  const fb = await routeAndRelay(client, chat('Served by the fallback. '.repeat(10)), { useFallback: true });
  const pick = nameOf[fb.destinations[0]], fallback = nameOf[fb.destinations[1]];
  const before = { pick: await requestsOf(pick), fallback: await requestsOf(fallback) };
  const fb2 = await routeAndRelay(client, chat('Served by the fallback, again. '.repeat(10)), { useFallback: true });
  const after = { pick: await requestsOf(nameOf[fb2.destinations[0]]), fallback: await requestsOf(nameOf[fb2.destinations[1]]) };
  check('DestinationEndpointServed: the fallback served it', fb.status === 200 && fb2.status === 200);
  if (nameOf[fb2.destinations[0]] === pick) {
    check('DestinationEndpointServed: counted on the served worker, not the pick',
          after.fallback - before.fallback === 1 && after.pick - before.pick === 0, JSON.stringify({ before, after }));
  }
  check('DestinationEndpointServed: nothing left in flight', (await inflight()) === 0);

  // Subset hint.
  for (const target of pool) {
    const h = await routeAndRelay(client, chat(`Pinned to ${target}. `.repeat(8)),
      { metadata: hint({ stringValue: target }) });
    check(`subset hint (comma string) ${nameOf[target]}: honoured`, h.destinations?.length === 1 && h.dest === target && h.status === 200, h.lb);
  }
  for (const [label, v] of [['empty list', { listValue: { values: [] } }], ['empty string', { stringValue: '' }],
                            ['no pool endpoint', { listValue: { values: [{ stringValue: '10.9.9.9:8000' }] } }]]) {
    const h = await routeAndRelay(client, chat('Nowhere to go.'), { metadata: hint(v) });
    check(`subset hint, ${label}: ImmediateResponse 503`, h.immediate?.immediate_response?.status?.code === 'ServiceUnavailable' && h.ended,
          JSON.stringify(h.immediate));
  }

  // No body.
  const g = openStream(client);
  g.send({ request_headers: hdrs([[':method', 'GET'], [':path', '/v1/models']], true) });
  const gh = await g.next();
  check('no body: picked at the headers, a pool endpoint, no content-length', gh.response === 'request_headers' &&
        pool.includes(setHeaders(gh)['x-gateway-destination-endpoint'].split(',')[0]) && !('content-length' in setHeaders(gh)) &&
        lbOf(gh) === setHeaders(gh)['x-gateway-destination-endpoint'], JSON.stringify(setHeaders(gh)));
  g.end(); await g.done;

  // An inference path without a body is a client error (400), as on the HTTP path.
  const e = openStream(client);
  e.send({ request_headers: hdrs([[':method', 'POST'], [':path', '/v1/chat/completions']], true) });
  const eh = await e.next();
  check('POST /v1/chat/completions without a body: ImmediateResponse 400', eh.immediate_response?.status?.code === 'BadRequest',
        JSON.stringify(eh).slice(0, 200));
  await e.done;

  // A large body: chunks of at most 62,000 bytes.
  // Big in bytes, short in tokens (the `user` field is not prompt), so it fits the context.
  const big = JSON.stringify(chat('A big body.', { max_tokens: 1, user: 'u'.repeat(150000) }));
  const L = openStream(client);
  L.send({ request_headers: hdrs([[':method', 'POST'], [':path', '/v1/chat/completions']], false) });
  for (let i = 0; i < big.length; i += 50000) {
    L.send({ request_body: { body: Buffer.from(big.slice(i, i + 50000)), end_of_stream: i + 50000 >= big.length } });
  }
  const lh = await L.next();
  check('large body: routed', lh.response === 'request_headers', JSON.stringify(lh).slice(0, 300));
  const chunks = [];
  for (; lh.response === 'request_headers';) { const c = await L.next(); chunks.push(streamed(c, 'request_body')); if (chunks.at(-1).end_of_stream) break; }
  check('large body: content-length of the whole', lh.response === 'request_headers' && setHeaders(lh)['content-length'] === String(big.length));
  check('large body: chunks ≤ 62,000 bytes, only the last ends the stream',
        chunks.length === 3 && chunks.every((c) => Buffer.from(c.body).length <= 62000) && chunks.slice(0, -1).every((c) => !c.end_of_stream) &&
        Buffer.concat(chunks.map((c) => Buffer.from(c.body))).toString() === big, String(chunks.length));
  L.cancel(); await L.done;  // the gateway gives up before the worker answers: booking released

  // Client errors: answered by the picker, no worker sees them.
  const simsBefore = [];
  for (const s of cluster.sims) simsBefore.push(metricSum(await text(s.port, '/metrics'), 'vllm:request_success_total'));
  const bad = await routeAndRelay(client, '{"model": "sim-model", "messages": [', { cut: 5 });
  check('malformed JSON: ImmediateResponse 400 with an OpenAI error body', bad.immediate?.immediate_response?.status?.code === 'BadRequest' &&
        JSON.parse(Buffer.from(bad.immediate.immediate_response.body).toString()).error?.message, JSON.stringify(bad.immediate));
  const unknown = await routeAndRelay(client, chat('hi', { model: 'no-such-model' }));
  check('unknown model: ImmediateResponse 404', unknown.immediate?.immediate_response?.status?.code === 'NotFound', JSON.stringify(unknown.immediate));
  const simsAfter = [];
  for (const s of cluster.sims) simsAfter.push(metricSum(await text(s.port, '/metrics'), 'vllm:request_success_total'));
  check('client errors reached no worker', simsAfter.every((v, i) => v === simsBefore[i]), `${simsBefore} → ${simsAfter}`);

  // The gateway goes away mid-response: the booking is released.
  const c = openStream(client);
  const body = JSON.stringify(chat('Cut mid-way. '.repeat(10), { max_tokens: 64 }));
  c.send({ request_headers: hdrs([[':method', 'POST'], [':path', '/v1/chat/completions']], false) });
  c.send({ request_body: { body: Buffer.from(body), end_of_stream: true } });
  const ch = await c.next();
  await c.next();  // the body
  const dest = setHeaders(ch)['x-gateway-destination-endpoint'].split(',')[0];
  c.send({ response_headers: hdrs([[':status', '200'], ['content-type', 'text/event-stream']], false), metadata_context: served(dest) });
  await c.next();
  c.send({ response_body: { body: Buffer.from('data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\n'), end_of_stream: false } });
  await c.next();
  const midway = await inflight();
  c.cancel(); await c.done;
  check('mid-response: the request was booked while it streamed', midway >= 1, String(midway));
  let left = -1;
  for (let i = 0; i < 50 && left !== 0; i++) { await new Promise((res) => setTimeout(res, 100)); left = await inflight(); }
  check('gateway gone mid-response: nothing left in flight', left === 0, String(left));

  // The picker's side of EppUnAvailableFailOpen: NOT_SERVING once draining.
  process.kill(cluster.serve_pid, 'SIGTERM');
  let ready = 'SERVING';
  for (let i = 0; i < 50 && ready === 'SERVING'; i++) { await new Promise((res) => setTimeout(res, 50)); ready = await healthOf('readiness'); }
  check('after SIGTERM: readiness NOT_SERVING', ready === 'NOT_SERVING', ready);
  check('after SIGTERM: the ext_proc service NOT_SERVING', (await healthOf('envoy.service.ext_proc.v3.ExternalProcessor')) === 'NOT_SERVING');
  check('after SIGTERM: liveness still SERVING', (await healthOf('liveness')) === 'SERVING');
  client.close(); hc.close();
} finally {
  await cluster.stop();
}
finish();

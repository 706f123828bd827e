// kvroute's ext_proc Endpoint Picker server (EppServer, via kvroute_epp_testserver) against an
// independent client: the official @grpc/grpc-js and @grpc/proto-loader play Envoy's side of
// the stream — the message sequence of a streamed chat request and its SSE response in
// FULL_DUPLEX_STREAMED mode — and check every field the EPP protocol requires, then the
// subset hint, 429/503 immediate responses, chunking of a large body, and gRPC health
// (liveness, readiness, the ext_proc service). Envoy's side of the stream is epp_harness.mjs's,
// shared with the serve --epp tests. No Envoy binary runs here (none can be installed on these
// machines; envoy_e2e_test.py is skipped without one).
//
// usage: node epp_server_test.mjs KVROUTE_EPP_TESTSERVER SOURCE_DIR
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { checker, hdrs, hint, lbOf, loadProtos, openStream, setHeaders, streamed } from './epp_harness.mjs';

const [serverBin, src] = process.argv.slice(2);
const { grpc, extproc, health } = loadProtos(src);

const { check, finish } = checker();

const A = '10.0.0.1:8000', B = '10.0.0.2:8000';
const server = spawn(serverBin, [A, B], { stdio: ['pipe', 'pipe', 'inherit'] });
const port = await new Promise((resolve, reject) => {
  let buf = '';
  server.stdout.on('data', (d) => { buf += d; const m = buf.match(/listening (\d+)/); if (m) resolve(m[1]); });
  server.on('exit', (c) => reject(new Error(`server exited ${c}`)));
  setTimeout(() => reject(new Error('server did not start')), 10000);
});
const addr = `127.0.0.1:${port}`;
const client = new extproc.envoy.service.ext_proc.v3.ExternalProcessor(addr, grpc.credentials.createInsecure());

const open = () => openStream(client);

try {
  // Health.
  const hc = new health.grpc.health.v1.Health(addr, grpc.credentials.createInsecure());
  for (const svc of ['liveness', 'readiness', 'envoy.service.ext_proc.v3.ExternalProcessor']) {
    const r = await new Promise((res) => hc.Check({ service: svc }, (err, out) => res(err ? err.code : out.status)));
    check(`health ${svc}: SERVING`, r === 'SERVING', String(r));
  }
  const unknown = await new Promise((res) => hc.Check({ service: 'nope' }, (err) => res(err?.code)));
  check('health of an unknown service: NOT_FOUND', unknown === grpc.status.NOT_FOUND, String(unknown));

  // A streamed chat request and its SSE response.
  const s = open();
  const body = JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'hello' }] });
  const cut = 20;
  s.send({ request_headers: hdrs([[':method', 'POST'], [':path', '/v1/chat/completions'], ['content-type', 'application/json']], false),
           protocol_config: { request_body_mode: 'FULL_DUPLEX_STREAMED', response_body_mode: 'FULL_DUPLEX_STREAMED' } });
  s.send({ request_body: { body: Buffer.from(body.slice(0, cut)), end_of_stream: false } });
  await new Promise((r) => setTimeout(r, 200));
  check('no answer before the request body is complete', s.pending() === 0, String(s.pending()));
  s.send({ request_body: { body: Buffer.from(body.slice(cut)), end_of_stream: true } });
  const h = await s.next();
  check('first answer is the request_headers response', h.response === 'request_headers', h.response);
  const set = setHeaders(h);
  check('x-gateway-destination-endpoint: pick then fallback', set['x-gateway-destination-endpoint'] === `${A},${B}`, JSON.stringify(set));
  check('envoy.lb metadata equals the header', lbOf(h) === set['x-gateway-destination-endpoint'], lbOf(h));
  check('content-length of the body', set['content-length'] === String(Buffer.byteLength(body)), set['content-length']);
  check('clear_route_cache', h.request_headers.response.clear_route_cache === true);
  const b = await s.next();
  check('then the body as streamed_response, end_of_stream', b.response === 'request_body' &&
        Buffer.from(streamed(b, 'request_body').body).toString() === body && streamed(b, 'request_body').end_of_stream === true);
  s.send({ response_headers: hdrs([[':status', '200'], ['content-type', 'text/event-stream']], false),
           metadata_context: { filter_metadata: { 'envoy.lb': { fields: { 'x-gateway-destination-endpoint-served': { stringValue: A } } } } } });
  const rh = await s.next();
  check('response_headers answered', rh.response === 'response_headers', rh.response);
  const sse = ['data: {"choices":[{"delta":{"content":"hi"}}]}\n\n', 'data: {"usage":{"completion_tokens":1}}\n\n', 'data: [DONE]\n\n'];
  for (let i = 0; i < sse.length; i++) {
    s.send({ response_body: { body: Buffer.from(sse[i]), end_of_stream: i === sse.length - 1 } });
    const e = await s.next();
    const sb = streamed(e, 'response_body');
    check(`SSE chunk ${i} echoed as it streams`, e.response === 'response_body' && Buffer.from(sb.body).toString() === sse[i] &&
          Boolean(sb.end_of_stream) === (i === sse.length - 1));
  }
  s.end();
  await s.done;
  check('stream closed cleanly', s.isEnded());

  // Round robin: the next request starts at B.
  const s2 = open();
  s2.send({ request_headers: hdrs([[':method', 'GET'], [':path', '/v1/models']], true) });
  const h2 = await s2.next();
  check('GET without body is picked at the headers', h2.response === 'request_headers' &&
        setHeaders(h2)['x-gateway-destination-endpoint'] === `${B},${A}` && setHeaders(h2)['content-length'] === undefined,
        JSON.stringify(setHeaders(h2)));
  s2.end(); await s2.done;

  // Shed: 429 immediate response, and the server ends the stream.
  const s3 = open();
  s3.send({ request_headers: hdrs([[':method', 'POST'], ['x-test-reject', '429']], true) });
  const r3 = await s3.next();
  check('429 immediate response', r3.response === 'immediate_response' && r3.immediate_response.status.code === 'TooManyRequests' &&
        Buffer.from(r3.immediate_response.body).toString() === 'request evicted by flow control', JSON.stringify(r3));
  await s3.done;
  check('server ends the stream after an immediate response', s3.isEnded());

  // Subset hint: honoured; present but empty → 503.
  const s4 = open();
  s4.send({ request_headers: hdrs([[':method', 'GET']], true), metadata_context: hint({ listValue: { values: [{ stringValue: B }] } }) });
  const r4 = await s4.next();
  check('subset hint restricts the pick', setHeaders(r4)['x-gateway-destination-endpoint'] === B, JSON.stringify(setHeaders(r4)));
  s4.end(); await s4.done;
  const s5 = open();
  s5.send({ request_headers: hdrs([[':method', 'GET']], true), metadata_context: hint({ stringValue: '' }) });
  const r5 = await s5.next();
  check('empty subset hint: 503', r5.response === 'immediate_response' && r5.immediate_response.status.code === 'ServiceUnavailable',
        JSON.stringify(r5));
  await s5.done;

  // A 150,000-byte body comes back in chunks of at most 62,000 bytes.
  const s6 = open();
  const big = Buffer.alloc(150000, 'a');
  s6.send({ request_headers: hdrs([[':method', 'POST']], false) });
  s6.send({ request_body: { body: big.subarray(0, 70000), end_of_stream: false } });
  s6.send({ request_body: { body: big.subarray(70000), end_of_stream: true } });
  await s6.next();
  const sizes = [];
  for (;;) {
    const c = await s6.next();
    const sb = streamed(c, 'request_body');
    sizes.push(sb.body.length);
    if (sb.end_of_stream) break;
  }
  check('large body: chunks of <= 62000 bytes, all bytes', sizes.every((n) => n <= 62000) && sizes.reduce((a, n) => a + n, 0) === 150000,
        JSON.stringify(sizes));
  s6.end(); await s6.done;
} catch (e) {
  check('exception', false, e.stack);
} finally {
  client.close();
  server.stdin.end();
  const code = await Promise.race([once(server, 'exit').then(([c]) => c), new Promise((r) => setTimeout(() => r('timeout'), 5000))]);
  check('server exits on stdin close', code === 0, String(code));
  if (code === 'timeout') server.kill('SIGKILL');
}
finish();

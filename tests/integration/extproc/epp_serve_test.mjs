// `kvroute serve --epp` in front of two `kvroute sim` processes, with the official
// @grpc/grpc-js playing Envoy's side of each ext_proc stream (headers → body → response
// headers → streamed SSE body chunks → trailers) and Node's fetch playing Envoy's upstream
// request to the endpoint the picker named. A multi-turn conversation: turn 1 goes somewhere,
// every follow-up turn must go to the worker holding the conversation's KV blocks; then the
// sims' own counters (vllm:request_success_total, vllm:prompt_tokens_total,
// vllm:generation_tokens_total) must agree with what kvroute booked and counted for the
// requests it routed, and nothing may be left booked. No Envoy runs here.
//
// usage: node epp_serve_test.mjs KVROUTE_BINARY SOURCE_DIR
import { checker, hint, httpText, loadProtos, metricSum, routeAndRelay, startEppCluster } from './epp_harness.mjs';

const [binary, src] = process.argv.slice(2);
const { grpc, extproc } = loadProtos(src);

const { check, finish } = checker();
const text = httpText;

const cluster = await startEppCluster(binary, src);
try {
  check('serve printed its epp address', cluster.epp > 0, JSON.stringify(cluster));
  const client = new extproc.envoy.service.ext_proc.v3.ExternalProcessor(`127.0.0.1:${cluster.epp}`, grpc.credentials.createInsecure());
  const endpointOf = Object.fromEntries(cluster.sims.map((s) => [`127.0.0.1:${s.port}`, s.name]));
  // Each sim's counters before the conversation (the start probe sent each one a request).
  const simMetric = async (s, name) => metricSum(await text(s.port, '/metrics'), name);
  const before = {};
  for (const s of cluster.sims) {
    before[s.name] = { ok: await simMetric(s, 'vllm:request_success_total'),
                       prompt: await simMetric(s, 'vllm:prompt_tokens_total'),
                       gen: await simMetric(s, 'vllm:generation_tokens_total') };
  }
  const kvBefore = await text(cluster.http, '/metrics');

  const system = 'You are a careful assistant. '.repeat(40);
  const messages = [{ role: 'system', content: system }];
  const chosen = [];
  let completionTokens = 0;
  const turns = 4;
  for (let t = 0; t < turns; t++) {
    messages.push({ role: 'user', content: `Turn ${t}: tell me about item ${t} in detail, please. `.repeat(6) });
    const r = await routeAndRelay(client, { model: 'sim-model', stream: true, max_tokens: 8,
      stream_options: { include_usage: true }, messages });
    if (!r.set) { check(`turn ${t} routed`, false, JSON.stringify(r.immediate)); break; }
    check(`turn ${t}: header and envoy.lb metadata name the same ordered list`, r.lb === r.set['x-gateway-destination-endpoint'], r.lb);
    check(`turn ${t}: the list is both workers, pick first`, r.destinations.length === 2 &&
          r.destinations.every((d) => d in endpointOf) && r.destinations[0] !== r.destinations[1], r.lb);
    check(`turn ${t}: content-length is the forwarded body's`, r.set['content-length'] === String(Buffer.byteLength(r.forwarded)));
    check(`turn ${t}: the body forwarded unchanged`, r.forwarded === JSON.stringify({ model: 'sim-model', stream: true, max_tokens: 8,
      stream_options: { include_usage: true }, messages }));
    check(`turn ${t}: clear_route_cache`, r.headersResponse.request_headers.response.clear_route_cache === true);
    check(`turn ${t}: worker answered 200 SSE`, r.status === 200 && r.responseHeaders.response === 'response_headers', String(r.status));
    check(`turn ${t}: every SSE chunk echoed as it streamed`, r.echoed === r.sent && r.echoes.every((e) => e.response === 'response_body'));
    check(`turn ${t}: end_of_stream echoed, trailers answered`, r.last.response === 'response_body' &&
          r.last.response_body.response.body_mutation.streamed_response.end_of_stream === true &&
          r.trailers.response === 'response_trailers', JSON.stringify(r.trailers));
    check(`turn ${t}: usage streamed back`, r.usage && r.usage.completion_tokens > 0, JSON.stringify(r.usage));
    completionTokens += r.usage ? r.usage.completion_tokens : 0;
    chosen.push(endpointOf[r.dest]);
    messages.push({ role: 'assistant', content: r.content });
  }
  console.log(`workers by turn: ${chosen.join(' ')}`);
  check('every follow-up turn went to the worker holding the conversation',
        chosen.length === turns && chosen.every((w) => w === chosen[0]), chosen.join(' '));

  // A second conversation whose first turn the gateway pins to the other worker (subset hint):
  // its follow-ups, with no hint, must follow it there — affinity, not a fixed favourite.
  const other = cluster.sims.find((s) => s.name !== chosen[0]);
  const messages2 = [{ role: 'system', content: 'A different system prompt, for the second chat. '.repeat(40) }];
  const chosen2 = [];
  for (let t = 0; t < 3; t++) {
    messages2.push({ role: 'user', content: `Second chat, turn ${t}. `.repeat(8) });
    const r = await routeAndRelay(client, { model: 'sim-model', stream: true, max_tokens: 8,
      stream_options: { include_usage: true }, messages: messages2 },
      t === 0 ? { metadata: hint({ listValue: { values: [{ stringValue: `127.0.0.1:${other.port}` }] } }) } : {});
    if (!r.set) { check(`second chat turn ${t} routed`, false, JSON.stringify(r.immediate)); break; }
    if (t === 0) check('subset hint honoured: one endpoint, the hinted one', r.destinations.length === 1 &&
                       endpointOf[r.destinations[0]] === other.name, r.lb);
    completionTokens += r.usage ? r.usage.completion_tokens : 0;
    chosen2.push(endpointOf[r.dest]);
    messages2.push({ role: 'assistant', content: r.content });
  }
  console.log(`second chat, workers by turn: ${chosen2.join(' ')}`);
  check('the second chat\'s follow-ups went to the worker its first turn was pinned to',
        chosen2.length === 3 && chosen2.every((w) => w === other.name), chosen2.join(' '));

  // The sims' own counters against kvroute's bookings and counts.
  const kvAfter = await text(cluster.http, '/metrics');
  let simOk = 0, simPrompt = 0, simGen = 0;
  for (const s of cluster.sims) {
    const ok = (await simMetric(s, 'vllm:request_success_total')) - before[s.name].ok;
    const routed = metricSum(kvAfter, 'kvroute_requests_total', { worker: s.name, status: '200' }) -
                   metricSum(kvBefore, 'kvroute_requests_total', { worker: s.name, status: '200' });
    check(`${s.name}: requests kvroute saw complete = the sim's successes`, ok === routed, `sim ${ok} kvroute ${routed}`);
    check(`${s.name}: nothing left booked in flight`,
          metricSum(kvAfter, 'kvroute_worker_inflight_requests', { worker: s.name }) === 0);
    simOk += ok;
    simPrompt += (await simMetric(s, 'vllm:prompt_tokens_total')) - before[s.name].prompt;
    simGen += (await simMetric(s, 'vllm:generation_tokens_total')) - before[s.name].gen;
  }
  check('the sims served exactly the two conversations', simOk === turns + 3, String(simOk));
  const kvPrompt = metricSum(kvAfter, 'kvroute_prompt_tokens_total') - metricSum(kvBefore, 'kvroute_prompt_tokens_total');
  check('prompt tokens kvroute booked = the sims\' prompt tokens (same tokenizer)', kvPrompt === simPrompt, `kvroute ${kvPrompt} sims ${simPrompt}`);
  check('completion tokens in the streamed usage = the sims\' generation tokens', completionTokens === simGen, `usage ${completionTokens} sims ${simGen}`);
  client.close();
} finally {
  await cluster.stop();
}
finish();

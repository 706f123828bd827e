// x-gateway-model-name-rewrite against `kvroute serve --epp` in front of two `kvroute sim`s,
// @grpc/grpc-js playing the gateway (epp_harness.mjs). Only w1 serves `sim-model-v2` (a LoRA
// adapter of its sim, listed in its worker's models), so a request for sim-model rewritten to
// sim-model-v2 must be routed to w1 every time, the body the picker hands back (ext_proc
// body mutation, streamed_response) must carry "model": "sim-model-v2" with everything else the
// client's and Content-Length following it, and the worker it names must answer as that
// model. Without the header the body goes on byte for byte; a rewrite to a model no worker
// serves is an ImmediateResponse 404. No Envoy runs here.
//
// usage: node epp_rewrite_test.mjs KVROUTE_BINARY SOURCE_DIR
import { checker, loadProtos, routeAndRelay, startEppCluster } from './epp_harness.mjs';

const [binary, src] = process.argv.slice(2);
const { grpc, extproc } = loadProtos(src);

const { check, finish } = checker();
// The model the worker answered as: the first SSE event's.
const answeredModel = (sent) => {
  const line = sent.split('\n').find((l) => l.startsWith('data: {'));
  return line ? JSON.parse(line.slice(6)).model : null;
};

const cluster = await startEppCluster(binary, src, '', { simModels: [[], ['sim-model-v2']] });
try {
  const client = new extproc.envoy.service.ext_proc.v3.ExternalProcessor(`127.0.0.1:${cluster.epp}`,
    grpc.credentials.createInsecure());
  const w1 = `127.0.0.1:${cluster.sims[1].port}`;
  const rewrite = [['x-gateway-model-name-rewrite', 'sim-model-v2']];

  // Distinct prompts, so neither cache affinity nor chance explains w1 four times in a row.
  for (let i = 0; i < 4; i++) {
    const body = { model: 'sim-model', stream: true, max_tokens: 4, temperature: 0.5,
                   messages: [{ role: 'user', content: `rewrite case ${i}: ` + 'words '.repeat(20 + 7 * i) }] };
    const r = await routeAndRelay(client, body, { extraHeaders: rewrite });
    if (!r.set) { check(`rewrite ${i}: routed`, false, JSON.stringify(r.immediate)); continue; }
    let forwarded = null;
    try { forwarded = JSON.parse(r.forwarded); } catch { /* checked below */ }
    check(`rewrite ${i}: the forwarded body's model is the rewrite`, forwarded?.model === 'sim-model-v2', r.forwarded.slice(0, 120));
    check(`rewrite ${i}: everything else is the client's`, forwarded &&
          JSON.stringify({ ...forwarded, model: 'sim-model' }) === JSON.stringify(body), r.forwarded.slice(0, 200));
    check(`rewrite ${i}: content-length follows the rewritten body`,
          r.set['content-length'] === String(Buffer.byteLength(r.forwarded)), r.set['content-length']);
    check(`rewrite ${i}: routed to w1, the only worker serving sim-model-v2`, r.dest === w1 && r.destinations.length === 1,
          `${r.lb} (w1 ${w1})`);
    check(`rewrite ${i}: the worker answered 200 as sim-model-v2`, r.status === 200 && answeredModel(r.sent) === 'sim-model-v2',
          `${r.status} ${answeredModel(r.sent)}`);
  }

  // No header: the client's bytes, unchanged, and either worker may serve sim-model.
  const plainBody = { model: 'sim-model', stream: true, max_tokens: 4, messages: [{ role: 'user', content: 'no rewrite here' }] };
  const plain = await routeAndRelay(client, plainBody);
  check('no header: routed, the body forwarded byte for byte', plain.set && plain.forwarded === JSON.stringify(plainBody) &&
        answeredModel(plain.sent) === 'sim-model', plain.forwarded);

  // A rewrite to a model the pool does not serve: the picker's 404, nothing forwarded.
  const missing = await routeAndRelay(client, plainBody, { extraHeaders: [['x-gateway-model-name-rewrite', 'no-such-model']] });
  const ir = missing.immediate?.immediate_response;
  let err = null;
  try { err = JSON.parse(Buffer.from(ir?.body || []).toString()); } catch { /* checked below */ }
  check('rewrite to an unserved model: ImmediateResponse 404 naming it', ir?.status?.code === 'NotFound' &&
        err?.error?.code === 'model_not_found' && err.error.message.includes('no-such-model'), JSON.stringify(missing.immediate).slice(0, 300));
} catch (e) {
  check('exception', false, e.stack);
} finally {
  await cluster.stop();
}
finish();

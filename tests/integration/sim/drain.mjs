// (b) Graceful drain, vLLM --shutdown-timeout semantics: on SIGTERM the sim stops accepting,
// lets in-flight streams finish until the deadline, aborts what remains, and exits 0.
// Usage: node drain.mjs <kvroute binary> finish|abort
import http from 'node:http';
import { startSim, check, runCases } from './sim_proc.mjs';

const [binary, mode] = process.argv.slice(2);

// One raw streaming request; resolves with what arrived and whether the body ended cleanly.
function stream(host, port, maxTokens, onFirstChunk) {
  return new Promise((resolve) => {
    const body = JSON.stringify({ model: 'sim-model', prompt: 'drain me please', stream: true,
                                  max_tokens: maxTokens, ignore_eos: true });
    const req = http.request({ host, port, path: '/v1/completions', method: 'POST',
                               headers: { 'content-type': 'application/json',
                                          'content-length': Buffer.byteLength(body) } });
    let text = '', first = true;
    req.on('response', (res) => {
      res.setEncoding('utf8');
      res.on('data', (d) => { text += d; if (first) { first = false; onFirstChunk(); } });
      res.on('end', () => resolve({ status: res.statusCode, text, clean: true }));
      res.on('error', () => resolve({ status: res.statusCode, text, clean: false }));
      res.on('aborted', () => resolve({ status: res.statusCode, text, clean: false }));
    });
    req.on('error', (e) => resolve({ status: 0, text, clean: false, error: String(e) }));
    req.end(body);
  });
}

function connectRefused(host, port) {
  return new Promise((resolve) => {
    const req = http.get({ host, port, path: '/health', agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode === 503);  // raced in before the listener closed: refused politely
    });
    req.on('error', () => resolve(true));
    req.setTimeout(5000, () => { req.destroy(); resolve(false); });
  });
}

// speedup 1: a decode step of the default profile is tens of ms, so 40 tokens take ~1 s real
// time and 5000 tokens minutes.
const finish = mode === 'finish';
const sim = startSim(binary, ['--speedup', '1', '--served-model-name', 'sim-model',
                              '--shutdown-timeout', finish ? '60' : '0.5']);
const { host, port } = await sim.ready;

await runCases([
  [finish ? 'in-flight streams finish after SIGTERM' : 'deadline aborts in-flight streams',
   async () => {
     const n = 3;
     let started = 0, signalled = false;
     const onFirst = () => {
       if (++started === n && !signalled) { signalled = true; sim.child.kill('SIGTERM'); }
     };
     const pending = Array.from({ length: n }, () => stream(host, port, finish ? 40 : 5000, onFirst));
     const results = await Promise.all(pending);
     check(signalled, 'SIGTERM was sent after every stream started');
     check(await connectRefused(host, port), 'a new request after SIGTERM is refused');
     for (const r of results) {
       check(r.status === 200, `status ${r.status}`);
       if (finish) {
         check(r.clean && r.text.endsWith('data: [DONE]\n\n'), `stream ended early: ${r.text.slice(-200)}`);
         check(r.text.includes('"finish_reason":"length"'), 'finish_reason length');
       } else {
         check(!r.text.includes('data: [DONE]'), 'a stream cut at the deadline has no [DONE]');
       }
     }
   }],
], async () => {
  const r = await sim.waitExit(finish ? 60000 : 10000);
  if (r.code !== 0) {
    console.log(`FAIL sim exit ${JSON.stringify(r)}: ${sim.stderr()}`);
    return false;
  }
  console.log(`ok   sim exited 0 (${sim.stderr().trim().split('\n').pop()})`);
  return true;
});

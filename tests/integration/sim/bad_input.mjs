// (c) Bad input against a live sim: the api/ corpus of bad requests (each must get its
// status and an OpenAI-style error object), plus the sim's own checks (unknown model, context
// length, unknown path, wrong method). Nothing may crash the server: /health is checked last.
// Usage: node bad_input.mjs <kvroute binary> <bad_requests.json or "">
import fs from 'node:fs';
import net from 'node:net';
import { startSim, check, runCases } from './sim_proc.mjs';

const [binary, corpusPath] = process.argv.slice(2);
const sim = startSim(binary, ['--speedup', '100', '--served-model-name', 'm',
                              '--max-model-len', '256', '--no-kv-events']);
const { host, port } = await sim.ready;
const base = `http://${host}:${port}`;

async function post(path, body, method = 'POST') {
  const r = await fetch(base + path, { method, body, headers: { 'content-type': 'application/json' },
                                       signal: AbortSignal.timeout(10000) });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: r.status, json, text };
}

// Writes `bytes` on a fresh loopback connection and collects what the server sends until it
// closes the connection (or 5 s pass: `closed` false then).
function rawExchange(bytes) {
  return new Promise((resolve) => {
    const socket = net.connect(port, host);
    let data = '';
    const timer = setTimeout(() => { socket.destroy(); resolve({ data, closed: false }); }, 5000);
    socket.on('connect', () => socket.write(bytes));
    socket.on('data', (d) => { data += d.toString('latin1'); });
    socket.on('error', () => {});
    socket.on('close', () => { clearTimeout(timer); resolve({ data, closed: true }); });
  });
}

function checkError(r, status, what) {
  check(r.status === status, `${what}: status ${r.status} (want ${status}) ${r.text.slice(0, 200)}`);
  check(r.json && r.json.error && typeof r.json.error.message === 'string',
        `${what}: error object ${r.text.slice(0, 200)}`);
}

const cases = [
  ['unknown model is 404', async () => {
    checkError(await post('/v1/completions', '{"model":"other","prompt":"x"}'), 404, 'model');
  }],
  ['prompt longer than max_model_len is 400', async () => {
    const prompt = 'ab '.repeat(400);
    const r = await post('/v1/completions', JSON.stringify({ model: 'm', prompt, max_tokens: 4 }));
    checkError(r, 400, 'too long');
    check(r.json.error.message.includes('maximum context length'), r.json.error.message);
  }],
  ['max_tokens beyond the context is 400', async () => {
    checkError(await post('/v1/completions', '{"model":"m","prompt":"x","max_tokens":100000}'),
               400, 'max_tokens');
  }],
  ['out-of-vocabulary token id is 400', async () => {
    checkError(await post('/v1/completions', '{"model":"m","prompt":[4294967295]}'), 400, 'oov');
  }],
  ['unknown path is 404', async () => {
    checkError(await post('/v1/nothing', '{}'), 404, 'path');
  }],
  ['wrong method is 405', async () => {
    checkError(await post('/v1/completions', undefined, 'GET'), 405, 'method');
  }],
  // Request smuggling: Content-Length and Transfer-Encoding together get a 400 with an
  // OpenAI error object, Connection: close, and the server closes the connection.
  ['Content-Length with Transfer-Encoding: chunked is 400 and closes', async () => {
    const body = '{"model":"m","prompt":"x","max_tokens":1}';
    const r = await rawExchange(
      `POST /v1/completions HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${body.length}\r\nTransfer-Encoding: chunked\r\n\r\n` +
      `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`);
    check(r.data.startsWith('HTTP/1.1 400 '), `status line: ${r.data.slice(0, 80)}`);
    check(/\r\nconnection: close\r\n/i.test(r.data), `Connection: close: ${r.data.slice(0, 300)}`);
    const json = JSON.parse(r.data.slice(r.data.indexOf('\r\n\r\n') + 4));
    check(json.error && typeof json.error.message === 'string' && json.error.code === 400,
          `error object: ${JSON.stringify(json)}`);
    check(r.closed, 'the server closed the connection');
  }],
];
if (corpusPath && fs.existsSync(corpusPath)) {
  const corpus = JSON.parse(fs.readFileSync(corpusPath, 'utf8'));
  cases.push([`api corpus: ${corpus.length} bad requests`, async () => {
    const failures = [];
    for (const c of corpus) {
      const r = await post(c.path, c.body);
      const ok = r.status === c.status && r.json && r.json.error &&
                 typeof r.json.error.message === 'string';
      if (!ok) failures.push(`${c.name}: ${r.status} ${r.text.slice(0, 120)}`);
    }
    check(failures.length === 0, `\n  ${failures.join('\n  ')}`);
  }]);
}
cases.push(['server still healthy', async () => {
  const r = await fetch(`${base}/health`, { signal: AbortSignal.timeout(5000) });
  check(r.status === 200, `health ${r.status}`);
}]);

await runCases(cases, async () => {
  sim.child.kill('SIGTERM');
  const r = await sim.waitExit(15000);
  return r.code === 0;
});

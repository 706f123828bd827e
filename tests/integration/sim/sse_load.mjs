// Load generator for the "kvroute sim" benchmark (docs/benchmarks.md): keeps `concurrency`
// streaming completions open against a running sim for `seconds`, counts SSE events
// received, and prints chunks per second. Not a test: it asserts nothing.
// Usage: node sse_load.mjs <port> <model> [concurrency=64] [seconds=10] [max_tokens=1024]
import http from 'node:http';

const [port, model, concurrency = '64', seconds = '10', maxTokens = '1024'] = process.argv.slice(2);
const agent = new http.Agent({ keepAlive: true, maxSockets: Number(concurrency) });
const deadline = Date.now() + Number(seconds) * 1000;
let chunks = 0, requests = 0, errors = 0;

function one() {
  return new Promise((resolve) => {
    const body = JSON.stringify({ model, prompt: `load ${requests % 50} hello world`, stream: true,
                                  max_tokens: Number(maxTokens), ignore_eos: true });
    const req = http.request({ host: '127.0.0.1', port: Number(port), path: '/v1/completions',
                               method: 'POST', agent,
                               headers: { 'content-type': 'application/json',
                                          'content-length': Buffer.byteLength(body) } });
    req.on('response', (res) => {
      let tail = '';
      res.setEncoding('utf8');
      res.on('data', (d) => {
        const s = tail + d;
        const parts = s.split('\n\n');
        tail = parts.pop();
        if (Date.now() < deadline) chunks += parts.length;
      });
      res.on('end', () => { requests++; resolve(); });
      res.on('error', () => { errors++; resolve(); });
    });
    req.on('error', () => { errors++; resolve(); });
    req.end(body);
  });
}

async function worker() {
  while (Date.now() < deadline) await one();
}
const t0 = Date.now();
await Promise.all(Array.from({ length: Number(concurrency) }, worker));
const elapsed = (Math.min(Date.now(), deadline) - t0) / 1000;
console.log(JSON.stringify({ concurrency: Number(concurrency), seconds: elapsed, chunks,
                             chunks_per_s: Math.round(chunks / elapsed), requests, errors }));
agent.destroy();

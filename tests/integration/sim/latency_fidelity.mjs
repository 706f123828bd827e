// Measures one request alone on a running sim (client side, real time × speedup = simulated)
// for the "kvroute sim" benchmark: TTFT and mean ITL over `reps` sequential requests, each with
// a fresh prompt of the same length (no cache hits). Prints JSON. Not a test: it asserts nothing.
// Usage: node latency_fidelity.mjs <port> <model> <speedup> <prompt_words> <max_tokens> [reps=5]
import http from 'node:http';

const [port, model, speedup, promptWords, maxTokens, reps = '5'] = process.argv.slice(2);

function one(i) {
  return new Promise((resolve, reject) => {
      const prompt = Array.from({ length: Number(promptWords) }, (_, k) => `w${i}x${k}`).join(' ');
    const body = JSON.stringify({ model, prompt, stream: true, max_tokens: Number(maxTokens),
                                  ignore_eos: true, stream_options: { include_usage: true } });
    const t0 = process.hrtime.bigint();
    const times = [];
    const req = http.request({ host: '127.0.0.1', port: Number(port), path: '/v1/completions',
                               method: 'POST', agent: false,
                               headers: { 'content-type': 'application/json',
                                          'content-length': Buffer.byteLength(body) } });
    req.on('response', (res) => {
      let buf = '';
      res.setEncoding('utf8');
      res.on('data', (d) => {
        buf += d;
        const parts = buf.split('\n\n');
        buf = parts.pop();
        const now = process.hrtime.bigint();
        for (const p of parts) {
          if (p.includes('"choices":[{')) times.push(now);
          const u = p.match(/"prompt_tokens":(\d+)/);
          if (u && p.includes('"choices":[]')) promptTokens = Number(u[1]);
        }
      });
      res.on('end', () => resolve({ t0, times }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const s = Number(speedup);
const ttft = [], itl = [];
let promptTokens = 0;
for (let i = 0; i < Number(reps); i++) {
  const { t0, times } = await one(1000 + i);  // same length every rep, different text
  ttft.push(Number(times[0] - t0) / 1e9 * s);
  for (let k = 1; k < times.length; k++) itl.push(Number(times[k] - times[k - 1]) / 1e9 * s);
}
const mean = (a) => a.reduce((x, y) => x + y, 0) / a.length;
// The sim's own view (simulated time, from /metrics): arrival → first token as the server saw it.
const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
const metric = (name) => Number((metrics.match(new RegExp(`^${name}\\{[^}]*\\} (\\S+)$`, 'm')) || [])[1]);
const serverTtft = metric('vllm:time_to_first_token_seconds_sum') /
                   metric('vllm:time_to_first_token_seconds_count');
const serverItl = metric('vllm:inter_token_latency_seconds_sum') /
                  metric('vllm:inter_token_latency_seconds_count');
console.log(JSON.stringify({ server_ttft_sim_s: serverTtft, server_itl_mean_sim_s: serverItl }));
console.log(JSON.stringify({ speedup: s, prompt_tokens: promptTokens,
                             ttft_sim_s: mean(ttft), itl_mean_sim_s: mean(itl),
                             ttft_samples: ttft.map((x) => +x.toFixed(5)) }));

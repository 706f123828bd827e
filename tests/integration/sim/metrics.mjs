// (d) /metrics of a live sim parses as Prometheus text (format 0.0.4) and carries vLLM's
// metric names, types and labels after some traffic.
// Usage: node metrics.mjs <kvroute binary>
import { startSim, check, runCases } from './sim_proc.mjs';

const [binary] = process.argv.slice(2);
const sim = startSim(binary, ['--speedup', '100', '--served-model-name', 'sim-model']);
const { host, port } = await sim.ready;
const base = `http://${host}:${port}`;

// A strict line parser for the text format: every line is a HELP/TYPE comment or a sample.
function parse(text) {
  const types = new Map(), samples = [];
  const name = '[a-zA-Z_:][a-zA-Z0-9_:]*';
  const label = `[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\\\\n]|\\\\[\\\\"n])*"`;
  const sampleRe = new RegExp(`^(${name})(?:\\{((?:${label})(?:,${label})*)?,?\\})? (\\S+)(?: -?\\d+)?$`);
  text.split('\n').forEach((line, i) => {
    if (line === '') return;
    let m;
    if ((m = line.match(new RegExp(`^# TYPE (${name}) (counter|gauge|histogram|summary|untyped)$`)))) {
      types.set(m[1], m[2]);
    } else if (line.startsWith('# HELP ') || line.startsWith('#')) {
      // comment
    } else if ((m = line.match(sampleRe))) {
      const value = Number(m[3] === '+Inf' ? Infinity : m[3]);
      check(!Number.isNaN(value) || m[3] === 'NaN', `line ${i + 1}: bad value ${line}`);
      const labels = {};
      for (const l of (m[2] || '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2];
      samples.push({ name: m[1], labels, value });
    } else {
      throw new Error(`line ${i + 1} is not Prometheus text: ${line}`);
    }
  });
  return { types, samples };
}

await runCases([
  ['metrics parse and carry vLLM names after traffic', async () => {
    for (let i = 0; i < 3; i++) {
      const r = await fetch(`${base}/v1/completions`, {
        method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'sim-model', prompt: 'the same prompt '.repeat(20),
                               max_tokens: 4, ignore_eos: true }),
        signal: AbortSignal.timeout(10000) });
      check(r.status === 200, `completion ${r.status}`);
      await r.text();
    }
    // Counters are booked after the last chunk went out (as in vLLM, where the API server and
    // the engine's stats run apart), so a scrape right after the third answer may not count it
    // yet: scrape until the third success shows, bounded, then check everything on that scrape.
    let res, text;
    for (let attempt = 0; attempt < 100; attempt++) {
      res = await fetch(`${base}/metrics`, { signal: AbortSignal.timeout(10000) });
      text = await res.text();
      if (/^vllm:request_success_total\{[^}]*finished_reason="length"[^}]*\} 3$/m.test(text)) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    check(res.status === 200, `metrics ${res.status}`);
    check((res.headers.get('content-type') || '').startsWith('text/plain'), 'content-type');
    const { types, samples } = parse(text);
    const want = {
      'vllm:num_requests_running': 'gauge', 'vllm:num_requests_waiting': 'gauge',
      'vllm:kv_cache_usage_perc': 'gauge', 'vllm:prefix_cache_queries_total': 'counter',
      'vllm:prefix_cache_hits_total': 'counter', 'vllm:prompt_tokens_total': 'counter',
      'vllm:generation_tokens_total': 'counter', 'vllm:num_preemptions_total': 'counter',
      'vllm:request_success_total': 'counter', 'vllm:time_to_first_token_seconds': 'histogram',
      'vllm:inter_token_latency_seconds': 'histogram', 'vllm:e2e_request_latency_seconds': 'histogram',
      'vllm:cache_config_info': 'gauge',
    };
    for (const [n, t] of Object.entries(want)) check(types.get(n) === t, `${n} type ${types.get(n)}`);
    const one = (n, labels = {}) => samples.find((s) => s.name === n &&
        Object.entries(labels).every(([k, v]) => s.labels[k] === v));
    check(one('vllm:num_requests_running', { model_name: 'sim-model', engine: '0' }), 'labels');
    check(one('vllm:generation_tokens_total').value === 12, 'generation tokens');
    check(one('vllm:request_success_total', { finished_reason: 'length' }).value === 3, 'success');
    check(one('vllm:time_to_first_token_seconds_count').value === 3, 'ttft count');
    check(one('vllm:prefix_cache_hits_total').value > 0, 'prefix cache hits');
    check(one('vllm:time_to_first_token_seconds_bucket', { le: '+Inf' }).value === 3, '+Inf bucket');
    const info = one('vllm:cache_config_info');
    check(info.value === 1 && info.labels.block_size === '16' && Number(info.labels.num_gpu_blocks) > 0 &&
          info.labels.prefix_caching_hash_algo === 'sha256_cbor' &&
          info.labels.enable_prefix_caching === 'True' && 'num_cpu_blocks' in info.labels,
          JSON.stringify(info.labels));
  }],
], async () => {
  sim.child.kill('SIGTERM');
  return (await sim.waitExit(15000)).code === 0;
});

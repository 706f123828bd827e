// The official `openai` npm client (v7), unchanged, through kvroute serve in front of two
// sims: completions and chat, streaming and not, models.list.
// Usage: node openai_client.mjs <kvroute binary> <repo root>
import { createRequire } from 'node:module';
import { startCluster } from './cluster_harness.mjs';

const [binary, root] = process.argv.slice(2);
const require = createRequire(`${root}/package.json`);
const OpenAI = require('openai');

// cluster_harness.mjs: 2 sims behind kvroute serve, stopped (by pid) by stop().
const { port, stop } = await startCluster(binary);

function check(cond, message) { if (!cond) throw new Error(`check failed: ${message}`); }

const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'unused',
                            maxRetries: 0, timeout: 30000 });
const model = 'sim-model';
let failed = 0;
const cases = [
  ['models.list', async () => {
    const page = await client.models.list();
    check(page.data.length === 1 && page.data[0].id === model, JSON.stringify(page.data));
  }],
  ['completions, non-streaming', async () => {
    const r = await client.completions.create({ model, prompt: 'Hello', max_tokens: 5, ignore_eos: true });
    check(r.choices[0].text.length > 0 && r.usage.completion_tokens === 5, JSON.stringify(r));
  }],
  ['completions, streaming', async () => {
    const stream = await client.completions.create({ model, prompt: 'Stream', max_tokens: 6,
      ignore_eos: true, stream: true, stream_options: { include_usage: true } });
    let text = '', usage = null;
    for await (const chunk of stream) {
      if (chunk.choices.length) text += chunk.choices[0].text;
      if (chunk.usage) usage = chunk.usage;
    }
    check(text.length > 0 && usage && usage.completion_tokens === 6, `${text} ${JSON.stringify(usage)}`);
  }],
  ['chat, non-streaming', async () => {
    const r = await client.chat.completions.create({ model,
      messages: [{ role: 'user', content: 'Hi!' }], max_completion_tokens: 4, ignore_eos: true });
    check(r.choices[0].message.role === 'assistant' && r.usage.completion_tokens === 4, JSON.stringify(r));
  }],
  ['chat, streaming', async () => {
    const stream = await client.chat.completions.create({ model,
      messages: [{ role: 'user', content: 'Stream please' }], max_tokens: 5, ignore_eos: true,
      stream: true });
    let text = '', finish = null;
    for await (const chunk of stream) {
      const c = chunk.choices[0];
      if (c?.delta?.content) text += c.delta.content;
      if (c?.finish_reason) finish = c.finish_reason;
    }
    check(text.length > 0 && finish === 'length', `${text} ${finish}`);
  }],
  ['errors surface as APIError with status', async () => {
    try {
      await client.completions.create({ model: 'nope', prompt: 'x' });
      check(false, 'no error');
    } catch (e) {
      check(e.status === 404, `${e.status} ${e.message}`);
    }
  }],
];
for (const [name, fn] of cases) {
  try { await fn(); console.log(`ok   ${name}`); } catch (e) { failed++; console.log(`FAIL ${name}: ${e.stack || e}`); }
}
await stop();
process.exit(failed ? 1 : 0);

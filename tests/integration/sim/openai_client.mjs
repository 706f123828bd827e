// (a) The official `openai` npm client against a live `kvroute sim`: completions and chat,
// streaming and not, include_usage, cached_tokens on a repeated prompt, /v1/models.
// Usage: node openai_client.mjs <kvroute binary> <repo root>
import { createRequire } from 'node:module';
import { startSim, check, runCases } from './sim_proc.mjs';

const [binary, root] = process.argv.slice(2);
const require = createRequire(`${root}/package.json`);
const OpenAI = require('openai');

const sim = startSim(binary, ['--speedup', '100', '--served-model-name', 'sim-model']);
const { host, port } = await sim.ready;
const client = new OpenAI({ baseURL: `http://${host}:${port}/v1`, apiKey: 'unused', maxRetries: 0,
                            timeout: 30000 });
const model = 'sim-model';
const longPrompt = Array.from({ length: 120 }, (_, i) => `word${i % 17}`).join(' ');

await runCases([
  ['models.list reports the served model', async () => {
    const page = await client.models.list();
    check(page.data.length === 1 && page.data[0].id === model, JSON.stringify(page.data));
    check(page.data[0].owned_by === 'vllm', 'owned_by');
  }],
  ['completions, non-streaming', async () => {
    const r = await client.completions.create({ model, prompt: 'Hello, world', max_tokens: 7,
                                                ignore_eos: true });
    check(r.object === 'text_completion', r.object);
    check(r.choices.length === 1 && r.choices[0].text.length > 0, JSON.stringify(r.choices));
    check(r.choices[0].finish_reason === 'length', r.choices[0].finish_reason);
    check(r.usage.completion_tokens === 7, JSON.stringify(r.usage));
    check(r.usage.total_tokens === r.usage.prompt_tokens + 7, 'total_tokens');
  }],
  ['completions with token-id prompt', async () => {
    const r = await client.completions.create({ model, prompt: [100, 200, 300], max_tokens: 3,
                                                ignore_eos: true });
    check(r.usage.prompt_tokens === 3, JSON.stringify(r.usage));
  }],
  ['completions, streaming with include_usage', async () => {
    const stream = await client.completions.create({
      model, prompt: 'Stream me', max_tokens: 6, ignore_eos: true, stream: true,
      stream_options: { include_usage: true } });
    let text = '', finish = null, usage = null, chunks = 0;
    for await (const chunk of stream) {
      chunks++;
      if (chunk.choices.length) {
        text += chunk.choices[0].text;
        if (chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
      }
      if (chunk.usage) usage = chunk.usage;
    }
    check(chunks >= 7, `chunks ${chunks}`);
    check(text.length > 0 && finish === 'length', `${text} ${finish}`);
    check(usage && usage.completion_tokens === 6, JSON.stringify(usage));
  }],
  ['chat, non-streaming', async () => {
    const r = await client.chat.completions.create({
      model, messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi!' }],
      max_completion_tokens: 5, ignore_eos: true });
    check(r.object === 'chat.completion', r.object);
    check(r.choices[0].message.role === 'assistant', 'role');
    check(r.choices[0].message.content.length > 0, 'content');
    check(r.usage.completion_tokens === 5, JSON.stringify(r.usage));
  }],
  ['chat, streaming with include_usage', async () => {
    const stream = await client.chat.completions.create({
      model, messages: [{ role: 'user', content: 'Tell me something.' }], max_tokens: 8,
      ignore_eos: true, stream: true, stream_options: { include_usage: true } });
    let role = null, content = '', finish = null, usage = null;
    for await (const chunk of stream) {
      for (const c of chunk.choices) {
        if (c.delta.role) role = c.delta.role;
        if (c.delta.content) content += c.delta.content;
        if (c.finish_reason) finish = c.finish_reason;
      }
      if (chunk.usage) usage = chunk.usage;
    }
    check(role === 'assistant', `role ${role}`);
    check(content.length > 0 && finish === 'length', `${content} ${finish}`);
    check(usage && usage.completion_tokens === 8 && usage.prompt_tokens > 0, JSON.stringify(usage));
  }],
  ['chat streaming without stream_options has no usage chunk', async () => {
    const stream = await client.chat.completions.create({
      model, messages: [{ role: 'user', content: 'x' }], max_tokens: 3, ignore_eos: true,
      stream: true });
    for await (const chunk of stream) check(!chunk.usage, 'unexpected usage');
  }],
  ['repeated prompt reports cached_tokens > 0', async () => {
    const ask = () => client.completions.create({ model, prompt: longPrompt, max_tokens: 2,
                                                  ignore_eos: true });
    const first = await ask();
    const second = await ask();
    const cached = second.usage.prompt_tokens_details?.cached_tokens ?? 0;
    check(cached > 0, `cached ${cached}; first ${JSON.stringify(first.usage)}`);
    check(cached <= second.usage.prompt_tokens, 'cached <= prompt');
  }],
  ['unknown model is a NotFoundError', async () => {
    try {
      await client.completions.create({ model: 'nope', prompt: 'x', max_tokens: 1 });
      check(false, 'expected an error');
    } catch (e) {
      check(e.status === 404, `status ${e.status}`);
    }
  }],
], async () => {
  sim.child.kill('SIGTERM');
  const r = await sim.waitExit(15000);
  if (r.code !== 0) {
    console.log(`FAIL sim exit ${JSON.stringify(r)}: ${sim.stderr()}`);
    return false;
  }
  return true;
});

// The official `@anthropic-ai/sdk` npm client, unchanged, through kvroute serve's
// POST /v1/messages in front of two live sims (which speak only OpenAI chat: kvroute forwards
// the request as /v1/chat/completions and translates the answer back): non-streaming,
// streaming (raw events and the SDK's accumulating MessageStream), a conversation staying on
// its worker, a continued assistant turn, and errors in Anthropic's shape.
// Usage: node anthropic_client.mjs <kvroute binary> <repo root>
import { createRequire } from 'node:module';
import { startCluster } from './cluster_harness.mjs';

const [binary, root] = process.argv.slice(2);
const require = createRequire(`${root}/package.json`);
const AnthropicModule = require('@anthropic-ai/sdk');
const Anthropic = AnthropicModule.default ?? AnthropicModule.Anthropic ?? AnthropicModule;

// cluster_harness.mjs: 2 sims behind kvroute serve, stopped (by pid) by stop().
const { port, stop } = await startCluster(binary);

function check(cond, message) { if (!cond) throw new Error(`check failed: ${message}`); }

const client = new Anthropic({ baseURL: `http://127.0.0.1:${port}`, apiKey: 'unused',
                               maxRetries: 0, timeout: 30000 });
const model = 'sim-model';
const longSystem = 'You are a careful assistant for the kvroute project. '.repeat(40);

function checkMessage(m, maxTokens) {
  check(m.type === 'message' && m.role === 'assistant', JSON.stringify(m));
  check(m.id.startsWith('msg_'), m.id);
  check(m.model === model, m.model);
  check(['end_turn', 'max_tokens'].includes(m.stop_reason), m.stop_reason);
  check(m.usage.input_tokens > 0, JSON.stringify(m.usage));
  check(m.usage.output_tokens >= 1 && m.usage.output_tokens <= maxTokens, JSON.stringify(m.usage));
  const text = m.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
  check(text.length > 0, JSON.stringify(m.content));
  if (m.stop_reason === 'max_tokens') check(m.usage.output_tokens === maxTokens, JSON.stringify(m));
  return text;
}

let failed = 0;
const cases = [
  ['messages.create, non-streaming', async () => {
    const m = await client.messages.create({ model, max_tokens: 5, system: 'Be brief.',
      messages: [{ role: 'user', content: 'Hello!' }] });
    checkMessage(m, 5);
  }],
  ['messages.create, stream: true (raw events in Anthropic order)', async () => {
    const stream = await client.messages.create({ model, max_tokens: 6, stream: true,
      messages: [{ role: 'user', content: [{ type: 'text', text: 'Stream please' }] }] });
    const types = [];
    let text = '', outputTokens = -1;
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === 'content_block_delta' && event.delta.type === 'text_delta') text += event.delta.text;
      if (event.type === 'message_delta') outputTokens = event.usage.output_tokens;
    }
    check(types[0] === 'message_start', types.join(','));
    check(types.at(-1) === 'message_stop' && types.at(-2) === 'message_delta', types.join(','));
    check(types.includes('content_block_start') && types.includes('content_block_stop'), types.join(','));
    check(text.length > 0 && outputTokens >= 1 && outputTokens <= 6, `${text} ${outputTokens}`);
  }],
  ['messages.stream (the SDK accumulates a final message)', async () => {
    const stream = client.messages.stream({ model, max_tokens: 4,
      messages: [{ role: 'user', content: 'Count to three' }] });
    let deltas = '';
    stream.on('text', (t) => { deltas += t; });
    const m = await stream.finalMessage();
    const text = checkMessage(m, 4);
    check(text === deltas, `${JSON.stringify(text)} vs ${JSON.stringify(deltas)}`);
  }],
  ['a conversation stays on its worker (cache-aware routing of /v1/messages)', async () => {
    const turn1 = [{ role: 'user', content: 'First question about the router design.' }];
    const r1 = await client.messages.create({ model, max_tokens: 4, system: longSystem,
      messages: turn1 }).withResponse();
    const worker1 = r1.response.headers.get('x-kvroute-worker');
    const answer = r1.data.content.map((b) => b.text ?? '').join('');
    let sameWorker = 0;
    for (let i = 0; i < 3; ++i) {
      const r = await client.messages.create({ model, max_tokens: 4, system: longSystem,
        messages: [...turn1, { role: 'assistant', content: answer },
                   { role: 'user', content: `Follow-up number ${i}.` }] }).withResponse();
      if (r.response.headers.get('x-kvroute-worker') === worker1) sameWorker++;
    }
    check(worker1 && sameWorker === 3, `worker1=${worker1} same=${sameWorker}`);
  }],
  ['a trailing assistant turn is continued (prefill)', async () => {
    const m = await client.messages.create({ model, max_tokens: 3,
      messages: [{ role: 'user', content: 'Say yes' }, { role: 'assistant', content: 'Yes,' }] });
    checkMessage(m, 3);
  }],
  ['unknown model: NotFoundError with an Anthropic error body', async () => {
    try {
      await client.messages.create({ model: 'nope', max_tokens: 5,
        messages: [{ role: 'user', content: 'x' }] });
      check(false, 'no error');
    } catch (e) {
      check(e instanceof Anthropic.NotFoundError, `${e.constructor.name} ${e.message}`);
      check(e.status === 404 && e.error?.type === 'error' &&
            e.error?.error?.type === 'not_found_error', JSON.stringify(e.error));
    }
  }],
  ['invalid request: BadRequestError naming the problem', async () => {
    try {
      await client.messages.create({ model, max_tokens: 0, messages: [{ role: 'user', content: 'x' }] });
      check(false, 'no error');
    } catch (e) {
      check(e instanceof Anthropic.BadRequestError, `${e.constructor.name} ${e.message}`);
      check(e.error?.error?.type === 'invalid_request_error' &&
            /max_tokens/.test(e.error?.error?.message), JSON.stringify(e.error));
    }
  }],
];
for (const [name, fn] of cases) {
  try { await fn(); console.log(`ok   ${name}`); } catch (e) { failed++; console.log(`FAIL ${name}: ${e.stack || e}`); }
}
await stop();
process.exit(failed ? 1 : 0);

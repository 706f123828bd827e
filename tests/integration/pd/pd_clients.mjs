// The client side of pd_test.py: multi-turn conversations through kvroute serve in front of
// one prefill sim and two decode sims, with the official `openai` (chat streamed and not,
// completions) and `@anthropic-ai/sdk` clients, unchanged. Every turn is checked against the
// sims' own metrics: the decode worker stays the conversation's, the decode sim pulls only the
// blocks the new turn added (kvroute:nixl_transferred_blocks_total), and the usage's
// cached_tokens is what the prefill sim found in its cache (vllm:prefix_cache_hits_total).
//
// Usage: node pd_clients.mjs <repo root> <serve port> <phase> <'{"p":port,"d0":port,...}'>
//   phase "split":    the conversations above (every turn must be split)
//   phase "decode_retry": kills (by pid) the decode sim of a new conversation after turn 1
//   phase "fallback": the prefill sim is dead; requests must all succeed (decoded locally)
// Prints one "ok <case>" line per case and a last line of JSON: {"requests": n}.
import { createRequire } from 'node:module';

const [root, portArg, phase, simsArg] = process.argv.slice(2);
const require = createRequire(`${root}/package.json`);
const OpenAI = require('openai');
const AnthropicModule = require('@anthropic-ai/sdk');
const Anthropic = AnthropicModule.default ?? AnthropicModule.Anthropic ?? AnthropicModule;

const port = Number(portArg);
const sims = JSON.parse(simsArg);  // name → port, and (decode_retry) pids: name → pid
const model = 'sim-model';
const BLOCK = 16;
const openai = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'unused',
                            maxRetries: 0, timeout: 30000 });
const anthropic = new Anthropic({ baseURL: `http://127.0.0.1:${port}`, apiKey: 'unused',
                                  maxRetries: 0, timeout: 30000 });
let requests = 0;

function check(cond, message) { if (!cond) throw new Error(`check failed: ${message}`); }

async function metric(simPort, name) {
  const text = await (await fetch(`http://127.0.0.1:${simPort}/metrics`)).text();
  let total = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith(`${name}{`) || line.startsWith(`${name} `)) {
      total += Number(line.slice(line.lastIndexOf(' ') + 1));
    }
  }
  return total;
}

// A counter after a turn: sims publish metrics on their engine thread just after the step,
// so a reader polls (bounded) until it moved, or accepts that it did not.
async function settled(simPort, name, before, timeoutMs = 2000) {
  const deadline = Date.now() + timeoutMs;
  let value = await metric(simPort, name);
  while (value === before && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    value = await metric(simPort, name);
  }
  return value;
}

function userText(conv, turn) {
  const words = [];
  for (let i = 0; i < 50; i++) words.push(`${conv}-t${turn}-w${i}`);
  return `Turn ${turn} of ${conv}: ${words.join(' ')}`;
}

// One turn through `send` (which returns {worker, prefill, promptTokens, cached, text}),
// checked against the sims' counters.
async function turn(state, k, send) {
  const decodeNames = Object.keys(sims).filter((n) => n !== 'p' && n !== 'pids');
  const before = {};
  for (const n of decodeNames) before[n] = await metric(sims[n], 'kvroute:nixl_transferred_blocks_total');
  const hitsBefore = await metric(sims.p, 'vllm:prefix_cache_hits_total');
  const r = await send();
  requests++;
  check(r.prefill === 'p', `turn ${k}: prefill worker header ${r.prefill}`);
  check(decodeNames.includes(r.worker), `turn ${k}: decode worker ${r.worker}`);
  if (state.worker === undefined) state.worker = r.worker;
  check(r.worker === state.worker, `turn ${k} decoded on ${r.worker}, the conversation's is ${state.worker}`);
  const moved = (await settled(sims[r.worker], 'kvroute:nixl_transferred_blocks_total', before[r.worker])) -
    before[r.worker];
  for (const n of decodeNames) {
    if (n === r.worker) continue;
    const other = await metric(sims[n], 'kvroute:nixl_transferred_blocks_total');
    check(other === before[n], `turn ${k}: ${n} pulled ${other - before[n]} blocks, not its turn`);
  }
  const hits = (await settled(sims.p, 'vllm:prefix_cache_hits_total', hitsBefore)) - hitsBefore;
  check(r.cached === hits, `turn ${k}: usage cached_tokens ${r.cached}, the prefill sim hit ${hits}`);
  const blocks = Math.ceil(r.promptTokens / BLOCK);
  if (k === 1) {
    check(moved >= Math.floor(r.promptTokens / BLOCK) && moved <= blocks,
          `turn 1: pulled ${moved} blocks of a ${r.promptTokens}-token prompt`);
  } else {
    // Only what this turn added: D holds the earlier turns (it pulled and decoded them).
    const added = blocks - Math.floor(state.promptTokens / BLOCK);
    check(moved >= 1 && moved <= added + 1,
          `turn ${k}: pulled ${moved} blocks; the turn added ${added} (prompt ${state.promptTokens} → ${r.promptTokens})`);
    check(r.cached > 0, `turn ${k}: the prefill sim found nothing cached`);
  }
  console.log(`     turn ${k}: decode ${r.worker}, prompt ${r.promptTokens} tokens, pulled ${moved} blocks, ` +
              `cached_tokens ${r.cached} (prefill sim hits ${hits})`);
  state.promptTokens = r.promptTokens;
  return r;
}

async function chatConversation(name, stream) {
  const state = {};
  await chatTurns(name, stream, state);
  return state.worker;
}

// A long decode kept running on `busyWorker` while a new conversation starts: the new one
// should then be placed on the other decode worker, and stay there for all its turns — so
// "the conversation's worker" is the cache's doing, not a tie always broken the same way.
async function chatConversationBesideALongDecode(name, busyWorker) {
  const { data, response } = await openai.chat.completions.create({ model,
    messages: [{ role: 'user', content: 'Keep talking.' }], max_tokens: 4000, ignore_eos: true,
    stream: true }).withResponse();
  requests++;
  check(response.headers.get('x-kvroute-worker') === busyWorker,
        `the long decode went to ${response.headers.get('x-kvroute-worker')}, not ${busyWorker}`);
  const iterator = data[Symbol.asyncIterator]();
  await iterator.next();  // its first token: its pull is over, it is decoding
  const state = {};
  try {
    await chatTurns(name, false, state);
  } finally {
    data.controller.abort();  // the client leaves: kvroute cancels the decode upstream
  }
  check(state.worker !== busyWorker, `${name} decoded on the busy worker ${busyWorker}`);
}

async function chatTurns(name, stream, state) {
  const messages = [{ role: 'system', content: 'You are terse.' }];
  for (let k = 1; k <= 4; k++) {
    messages.push({ role: 'user', content: userText(name, k) });
    const r = await turn(state, k, async () => {
      const body = { model, messages, max_tokens: 8, ignore_eos: true };
      if (!stream) {
        const { data, response } = await openai.chat.completions.create(body).withResponse();
        check(data.choices[0].finish_reason === 'length', JSON.stringify(data));
        return { worker: response.headers.get('x-kvroute-worker'),
                 prefill: response.headers.get('x-kvroute-prefill-worker'),
                 promptTokens: data.usage.prompt_tokens,
                 cached: data.usage.prompt_tokens_details?.cached_tokens,
                 text: data.choices[0].message.content };
      }
      const { data, response } = await openai.chat.completions.create(
        { ...body, stream: true, stream_options: { include_usage: true } }).withResponse();
      let text = '', usage = null, finish = null;
      for await (const chunk of data) {
        const c = chunk.choices[0];
        if (c?.delta?.content) text += c.delta.content;
        if (c?.finish_reason) finish = c.finish_reason;
        if (chunk.usage) usage = chunk.usage;
      }
      check(finish === 'length' && usage && usage.completion_tokens === 8, `${finish} ${JSON.stringify(usage)}`);
      return { worker: response.headers.get('x-kvroute-worker'),
               prefill: response.headers.get('x-kvroute-prefill-worker'),
               promptTokens: usage.prompt_tokens,
               cached: usage.prompt_tokens_details?.cached_tokens, text };
    });
    messages.push({ role: 'assistant', content: r.text });
  }
}

async function completionsConversation(name) {
  const state = {};
  let prompt = 'A running transcript.';
  for (let k = 1; k <= 4; k++) {
    prompt += ` ${userText(name, k)}`;
    const stream = k % 2 === 0;  // alternately streamed and not
    const r = await turn(state, k, async () => {
      const body = { model, prompt, max_tokens: 6, ignore_eos: true };
      if (!stream) {
        const { data, response } = await openai.completions.create(body).withResponse();
        return { worker: response.headers.get('x-kvroute-worker'),
                 prefill: response.headers.get('x-kvroute-prefill-worker'),
                 promptTokens: data.usage.prompt_tokens,
                 cached: data.usage.prompt_tokens_details?.cached_tokens,
                 text: data.choices[0].text };
      }
      const { data, response } = await openai.completions.create(
        { ...body, stream: true, stream_options: { include_usage: true } }).withResponse();
      let text = '', usage = null;
      for await (const chunk of data) {
        if (chunk.choices.length) text += chunk.choices[0].text;
        if (chunk.usage) usage = chunk.usage;
      }
      check(usage && usage.completion_tokens === 6, JSON.stringify(usage));
      return { worker: response.headers.get('x-kvroute-worker'),
               prefill: response.headers.get('x-kvroute-prefill-worker'),
               promptTokens: usage.prompt_tokens,
               cached: usage.prompt_tokens_details?.cached_tokens, text };
    });
    prompt += r.text;
  }
}

async function anthropicConversation(name) {
  const state = {};
  const messages = [];
  for (let k = 1; k <= 4; k++) {
    messages.push({ role: 'user', content: userText(name, k) });
    const stream = k % 2 === 1;
    const r = await turn(state, k, async () => {
      const body = { model, max_tokens: 8, system: 'You are terse.', messages };
      if (!stream) {
        const { data, response } = await anthropic.messages.create(body).withResponse();
        check(data.type === 'message', JSON.stringify(data));
        const text = data.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
        return { worker: response.headers.get('x-kvroute-worker'),
                 prefill: response.headers.get('x-kvroute-prefill-worker'),
                 promptTokens: data.usage.input_tokens,
                 cached: data.usage.cache_read_input_tokens ?? 0, text };
      }
      const { data, response } = await anthropic.messages.create({ ...body, stream: true })
        .withResponse();
      let text = '', usage = null;
      for await (const event of data) {
        if (event.type === 'content_block_delta' && event.delta.type === 'text_delta') text += event.delta.text;
        if (event.type === 'message_delta') usage = event.usage;
      }
      check(usage && usage.output_tokens >= 1, JSON.stringify(usage));
      return { worker: response.headers.get('x-kvroute-worker'),
               prefill: response.headers.get('x-kvroute-prefill-worker'),
               promptTokens: usage.input_tokens, cached: usage.cache_read_input_tokens ?? 0, text };
    });
    messages.push({ role: 'assistant', content: r.text });
  }
}

// A decode worker dies between two turns of its conversation: the next turn's decode leg
// fails before any byte, and kvroute places it again on the other decode worker (prefilling
// again on p) — the client sees an answer. `pids` are the sims this test's parent started.
async function decodeWorkerDies(pids) {
  const retries = async () => {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    return text.split('\n').filter((l) => l.startsWith('kvroute_retries_total{'))
      .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
  };
  const messages = [{ role: 'user', content: userText('retry', 1) }];
  const first = await openai.chat.completions.create(
    { model, messages, max_tokens: 4, ignore_eos: true }).withResponse();
  requests++;
  const dead = first.response.headers.get('x-kvroute-worker');
  check(dead in pids && dead !== 'p', `turn 1 decoded on ${dead}`);
  process.kill(pids[dead], 'SIGKILL');
  await new Promise((r) => setTimeout(r, 200));
  const before = await retries();
  messages.push({ role: 'assistant', content: first.data.choices[0].message.content },
                { role: 'user', content: userText('retry', 2) });
  const stream = await openai.chat.completions.create({ model, messages, max_tokens: 4,
    ignore_eos: true, stream: true, stream_options: { include_usage: true } }).withResponse();
  requests++;
  let usage = null;
  for await (const chunk of stream.data) if (chunk.usage) usage = chunk.usage;
  const worker = stream.response.headers.get('x-kvroute-worker');
  check(usage && usage.completion_tokens === 4, JSON.stringify(usage));
  check(worker !== dead && worker !== 'p', `turn 2 decoded on ${worker}; ${dead} is dead`);
  check(stream.response.headers.get('x-kvroute-prefill-worker') === 'p', 'turn 2 not split');
  check((await retries()) > before, 'no retry counted for the dead decode worker');
  console.log(`     ${dead} killed: turn 2 placed again on ${worker}`);
}

// The prefill sim is gone: every request must still be answered, by a decode worker alone.
async function fallbackRequests() {
  for (let i = 0; i < 6; i++) {
    const body = { model, messages: [{ role: 'user', content: userText('fallback', i) }],
                   max_tokens: 5, ignore_eos: true };
    if (i % 2 === 0) {
      const { data, response } = await openai.chat.completions.create(body).withResponse();
      check(data.usage.completion_tokens === 5, JSON.stringify(data));
      check(response.headers.get('x-kvroute-prefill-worker') === null, 'a dead prefill worker named');
    } else {
      const stream = await openai.chat.completions.create({ ...body, stream: true,
        stream_options: { include_usage: true } });
      let usage = null;
      for await (const chunk of stream) if (chunk.usage) usage = chunk.usage;
      check(usage && usage.completion_tokens === 5, JSON.stringify(usage));
    }
    requests++;
  }
}

const cases = phase === 'split'
  ? [['openai chat, streamed, 4 turns', async () => { firstWorker = await chatConversation('chat-stream', true); }],
     ['openai chat, not streamed, 4 turns, beside a long decode on the first conversation\'s worker',
      () => chatConversationBesideALongDecode('chat-json', firstWorker)],
     ['openai completions, streamed and not, 4 turns', () => completionsConversation('completions')],
     ['anthropic messages, streamed and not, 4 turns', () => anthropicConversation('messages')]]
  : phase === 'decode_retry'
  ? [['a decode worker killed mid-conversation: the next turn re-placed', () => decodeWorkerDies(sims.pids)]]
  : [['after the prefill sim died: 6 requests, none failed', fallbackRequests]];
let failed = 0;
let firstWorker;
for (const [name, fn] of cases) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e.stack ?? e}`);
  }
}
console.log(JSON.stringify({ requests }));
process.exit(failed ? 1 : 0);

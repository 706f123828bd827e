// The decode leg of a P/D request, streamed by the official `openai` npm client, as the
// client of a toy proxy would see it. Prints one JSON line: {text, finish, usage, chunks}.
// Usage: node pd_decode_stream.mjs <repo root> <base url> <request body JSON>
import { createRequire } from 'node:module';

const [root, baseURL, bodyJson] = process.argv.slice(2);
const require = createRequire(`${root}/package.json`);
const OpenAI = require('openai');

const client = new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0, timeout: 30000 });
const body = JSON.parse(bodyJson);
// kv_transfer_params is a vLLM extra: the SDK passes unknown body fields through.
const stream = await client.completions.create({ ...body, stream: true,
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
console.log(JSON.stringify({ text, finish, usage, chunks }));

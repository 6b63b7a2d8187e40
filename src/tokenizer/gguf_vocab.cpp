// A GGUF file's own tokenizer (llama.cpp's tokenizer.ggml.* metadata) as the tokenizer.json
// document that means the same, handed to the one tokenizer.json pipeline: pert has no second
// tokenizer implementation.
//
// What llama.cpp's loader reads (src/llama-vocab.cpp), and how each key becomes tokenizer.json:
//   tokenizer.ggml.model       "llama": SentencePiece BPE (pieces with "▁" for a space, byte
//                              tokens <0xNN>, scores); "gpt2": byte-level BPE with merges. Required
//                              (llama.cpp refuses a file without it). Others are refused.
//   tokenizer.ggml.pre         gpt2 only: names the pre-tokenizer (the split regexes). Missing:
//                              "default", as llama.cpp falls back to (with its warning). An unknown
//                              name is refused, as llama.cpp refuses it.
//   tokenizer.ggml.tokens      id -> piece, required. An empty piece is "[EMPTY_<id>]" and a piece
//                              given twice is refused, as llama.cpp does.
//   tokenizer.ggml.scores      id -> score (llama: the merge priority); missing: all 0 (llama.cpp).
//   tokenizer.ggml.token_type  id -> 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused,
//                              6 byte; missing: all normal (llama.cpp). Unknown and control tokens
//                              become special added tokens (found in a text only when special
//                              tokens are parsed, skipped by decode); user-defined ones added
//                              tokens that are always found, as llama.cpp's special-token split
//                              treats them. Byte tokens serve byte fallback; unused ones are
//                              vocabulary pieces only.
//   tokenizer.ggml.merges      gpt2: "left right" (split at the first space after the first
//                              byte, as llama.cpp does), rank = position. Required for gpt2.
//   tokenizer.ggml.{bos,eos,unknown,padding}_token_id  missing: llama.cpp's defaults (llama:
//                              bos 1, eos 2, unk 0; gpt2: bos 11, eos 11, no unk); an id outside
//                              the vocabulary is ignored (the default kept), as llama.cpp does.
//   tokenizer.ggml.add_bos_token / add_eos_token  what add_special puts around a text (the
//                              post-processor); missing: llama: BOS yes, EOS no; gpt2: BOS only
//                              for the Llama 3 pre-tokenizers, as llama.cpp.
//   tokenizer.ggml.add_space_prefix  llama: a "▁" before the text (missing: true, llama.cpp's
//                              default for SentencePiece models), and decode strips it again.
//
// SentencePiece merges from scores. llama.cpp's SPM tokenizer (and SentencePiece's BPE) start
// from one symbol per character and repeatedly merge the adjacent pair whose concatenation is a
// piece of the highest score, the leftmost on ties. A BPE by merge rank does the same when the
// merges list every split (left, right) of every normal piece into two normal pieces, ordered by
// the merged piece's score, highest first: the candidate a rank-BPE picks is then the one of the
// best score. This is HF's SentencePieceExtractor construction, ordered as current transformers
// orders it and as tools/convert/tokenizer_json.py does (tests/reference/tokenizer_test.py checks that against
// SentencePiece on the Llama-2 vocabulary): score descending, then the longer left part, then the
// longer right part (in characters), then generation order (pieces by id, a piece's splits by
// (id(left), id(right))).
// Ties: a SentencePiece BPE model gives every normal piece its own score (minus the merge step
// that made it), except the whitespace pieces "▁▁" ... that Llama-2 scores all -1e9; otherwise
// merges tie only between the splits of one piece. One split (left, right) has one rank, so its candidates
// go leftmost first, as in llama.cpp. Two different splits of one piece get two ranks, and the
// rank order differs from llama.cpp's leftmost rule only where both are candidates at once on
// neighbouring symbols (e.g. [a][aa][a] for "aaa"), which the leftmost merges before them mostly
// prevent: the length order above is the one that makes a run of "▁" grow left to right as
// SentencePiece merges it, and tests/reference/gguf_tokenizer_test.py checks the result against
// SentencePiece itself (Llama-2, its own scores) and llama2.c's encoder (tok512).
// Only normal pieces take part in merges, as results or parts: SentencePiece keeps control,
// unknown, byte (and user-defined: split out before) pieces out of its merge table, so the text
// "<s>" never merges into token 1 nor "<0x41>" into a byte token.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <unordered_map>

#include "pert/error.hpp"
#include "pert/gguf.hpp"
#include "pert/json_util.hpp"
#include "pert/memory.hpp"
#include "pert/tokenizer.hpp"
#include "tokenizer/internal.hpp"

namespace pert {
namespace tokenizer {

namespace {

const std::string kModel = "tokenizer.ggml.model", kPre = "tokenizer.ggml.pre", kTokens = "tokenizer.ggml.tokens",
                  kScores = "tokenizer.ggml.scores", kTypes = "tokenizer.ggml.token_type",
                  kMerges = "tokenizer.ggml.merges", kBos = "tokenizer.ggml.bos_token_id",
                  kEos = "tokenizer.ggml.eos_token_id", kUnk = "tokenizer.ggml.unknown_token_id",
                  kPad = "tokenizer.ggml.padding_token_id", kAddBos = "tokenizer.ggml.add_bos_token",
                  kAddEos = "tokenizer.ggml.add_eos_token", kAddSpace = "tokenizer.ggml.add_space_prefix";

enum TokenType { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

const char* const kSpace = "\xe2\x96\x81";  // "▁"

[[noreturn]] void fail(const GgufFile& f, const std::string& key, const std::string& what) {
  throw FormatError(f.path() + ": key '" + key + "' " + what);
}

std::string shown(std::string_view piece) {
  std::string s = printable(piece);
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return "'" + s + "'";
}

struct Vocab {
  std::vector<std::string> pieces;
  std::vector<int> types;
  std::vector<double> scores;
  std::unordered_map<std::string, int> ids;
  int n() const { return int(pieces.size()); }
};

// Whether whitespace after the file's special tokens is dropped, as llama.cpp's
// llama_vocab::load sets LLAMA_TOKEN_ATTR_RSTRIP by model name (GGUF carries no such flags; HF's
// tokenizer.json has them as each added token's "rstrip"): for a general.name holding "phi-3" or
// "phi3", every control, user-defined and unknown token but those of kNotStripped (</s>, set
// apart there, is one of them). (llama.cpp strips ASCII whitespace, HF's rule any White_Space
// character; they differ only for such a character after a special token.)
const std::set<std::string> kNotStripped = {"<unk>", "<s>", "<|endoftext|>"};
bool rstrips_specials(const GgufFile& f) {
  std::string name = f.opt_string("general.name").value_or("");
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos;
}

Vocab read_vocab(const GgufFile& f) {
  Vocab v;
  const GgufValue& tokens = f.get_array(kTokens, GgufKind::String);
  if (tokens.strings.empty()) fail(f, kTokens, "is empty");
  const size_t n = tokens.strings.size();
  // Real vocabularies hold up to ~262k tokens (Gemma 3); each costs ~400 bytes here and in the tokenizer.
  constexpr size_t kMaxTokens = size_t(1) << 21;
  if (n > kMaxTokens)
    fail(f, kTokens, "has " + std::to_string(n) + " tokens, more than pert's " + std::to_string(kMaxTokens));
  require_memory(512.0 * double(n), f.path() + ": the vocabulary's " + std::to_string(n) + " tokens");
  v.pieces.reserve(n);
  v.ids.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    std::string piece(tokens.strings[i]);
    size_t bad = 0;
    if (!valid_utf8(piece, &bad)) fail(f, kTokens, "entry " + std::to_string(i) + " " + shown(piece) + " is not valid UTF-8");
    if (piece.empty()) piece = "[EMPTY_" + std::to_string(i) + "]";  // llama.cpp's name for it
    auto [it, fresh] = v.ids.emplace(piece, int(i));
    if (!fresh)
      fail(f, kTokens, "has " + shown(piece) + " twice (ids " + std::to_string(it->second) + " and " + std::to_string(i) + ")");
    v.pieces.push_back(std::move(piece));
  }
  auto same_length = [&](const std::string& key, uint64_t count) {
    if (count != n)
      fail(f, key, "has " + std::to_string(count) + " entries, but " + kTokens + " has " + std::to_string(n));
  };
  v.types.assign(n, kNormal);  // llama.cpp: every token normal without the key
  if (f.find(kTypes)) {
    const GgufValue& types = f.get_array(kTypes, GgufKind::I32);
    same_length(kTypes, types.count);
    for (size_t i = 0; i < n; ++i) {
      const int64_t t = types.int_at(i);
      if (t < kNormal || t > kByte)
        fail(f, kTypes, "entry " + std::to_string(i) + " (" + shown(v.pieces[i]) + ") is " + std::to_string(t) +
                            ", not a token type (1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte)");
      v.types[i] = int(t);
    }
  }
  v.scores.assign(n, 0.0);  // llama.cpp: all 0 without the key
  if (f.find(kScores)) {
    const GgufValue& scores = f.get_array(kScores, GgufKind::F32);
    same_length(kScores, scores.count);
    for (size_t i = 0; i < n; ++i) {
      v.scores[i] = scores.float_at(i);
      if (std::isnan(v.scores[i])) fail(f, kScores, "entry " + std::to_string(i) + " is NaN");
    }
  }
  return v;
}

// A special token id: the key's value when it names a token, else the default (-1: none).
int special_id(const GgufFile& f, const Vocab& v, const std::string& key, int fallback) {
  const std::optional<int64_t> id = f.opt_int(key);
  if (id && *id >= 0 && *id < v.n()) return int(*id);
  return fallback >= 0 && fallback < v.n() ? fallback : -1;  // llama.cpp: out of range -> the default
}

// The pre-tokenizer llama.cpp runs for a gpt2 model's tokenizer.ggml.pre, as HF writes it: the
// splits, then each byte as its GPT-2 character.
struct PreSpec {
  json steps;
  bool ignore_merges = false, add_bos = false;
};

json split_regex(const std::string& pattern) {
  return {{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}, {"invert", false}};
}

json byte_level(bool use_regex) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", use_regex}};
}

const std::vector<std::string> kPreNames = {"default", "llama-bpe", "llama3", "llama-v3", "falcon3", "pixtral", "dbrx",
                                            "smaug-bpe", "qwen2", "deepseek-r1-qwen", "megrez", "stablelm2", "gpt-2",
                                            "phi-2", "mpt", "olmo", "smollm", "starcoder", "refact", "command-r", "codeshell"};

PreSpec pre_spec(const GgufFile& f, const std::string& name) {
  // The Llama 3 / cl100k pattern and Qwen 2's (single digits), as their tokenizer.json files write
  // them (llama.cpp spells the case-insensitive group out; the same matches).
  static const std::string llama3 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  static const std::string qwen2 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  PreSpec p;
  p.steps = json::array();
  auto in = [&](std::initializer_list<const char*> names) {
    return std::any_of(names.begin(), names.end(), [&](const char* n) { return name == n; });
  };
  if (in({"default"})) {  // llama.cpp's regexes for a BPE model of no known pre-tokenizer, each splitting the last's parts
    for (const char* re : {R"([\p{P}\$\+<=>\^~\|]+)", R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))",
                           R"(\p{N}+)", "[0-9][0-9][0-9]"})
      p.steps.push_back(split_regex(re));
    p.steps.push_back(byte_level(false));
  } else if (in({"llama-bpe", "llama3", "llama-v3", "falcon3", "pixtral", "dbrx", "smaug-bpe"})) {
    p.steps.push_back(split_regex(llama3));
    p.steps.push_back(byte_level(false));
    p.ignore_merges = p.add_bos = !in({"dbrx", "smaug-bpe"});  // llama.cpp sets both for the Llama 3 family
  } else if (in({"qwen2", "deepseek-r1-qwen", "megrez", "stablelm2"})) {
    p.steps.push_back(split_regex(qwen2));
    p.steps.push_back(byte_level(false));
  } else if (in({"gpt-2", "phi-2", "mpt", "olmo"})) {  // GPT-2's regex: the ByteLevel pre-tokenizer's own
    p.steps.push_back(byte_level(true));
  } else if (in({"smollm", "starcoder", "refact", "command-r", "codeshell"})) {  // each digit alone, then GPT-2's
    p.steps.push_back({{"type", "Digits"}, {"individual_digits", true}});
    p.steps.push_back(byte_level(true));
  } else {
    fail(f, kPre, shown(name) + " is not a pre-tokenizer pert knows (" + comma_list(kPreNames) + ")");
  }
  return p;
}

// HF's SentencePieceExtractor merges for a SentencePiece vocabulary (see the top of the file).
json spm_merges(const Vocab& v) {
  std::unordered_map<std::string_view, int> normal;
  for (int i = 0; i < v.n(); ++i)
    if (v.types[size_t(i)] == kNormal) normal.emplace(v.pieces[size_t(i)], i);
  struct Merge {
    double score;
    int left_chars, right_chars;
    int left, right;
  };
  std::vector<Merge> merges;
  std::vector<Merge> local;
  for (int i = 0; i < v.n(); ++i) {
    if (v.types[size_t(i)] != kNormal) continue;
    const std::string& p = v.pieces[size_t(i)];
    local.clear();
    int chars = 0;
    for (size_t k = 0; k < p.size();) {
      k += std::max<size_t>(1, utf8_char_len(p, k));
      ++chars;
      if (k >= p.size()) break;
      const auto l = normal.find(std::string_view(p).substr(0, k)), r = normal.find(std::string_view(p).substr(k));
      if (l != normal.end() && r != normal.end()) local.push_back({v.scores[size_t(i)], chars, 0, l->second, r->second});
    }
    const int total = int(utf8_length(p));
    for (Merge& m : local) m.right_chars = total - m.left_chars;
    std::sort(local.begin(), local.end(), [](const Merge& a, const Merge& b) { return std::make_pair(a.left, a.right) < std::make_pair(b.left, b.right); });
    merges.insert(merges.end(), local.begin(), local.end());
  }
  std::stable_sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) {
    if (a.score != b.score) return a.score > b.score;
    if (a.left_chars != b.left_chars) return a.left_chars > b.left_chars;
    return a.right_chars > b.right_chars;
  });
  json out = json::array();
  for (const Merge& m : merges) out.push_back({v.pieces[size_t(m.left)], v.pieces[size_t(m.right)]});
  return out;
}

// tokenizer.ggml.merges as [left, right] pairs, each part and their concatenation a token.
json gpt2_merges(const GgufFile& f, const Vocab& v) {
  const GgufValue& merges = f.get_array(kMerges, GgufKind::String);
  json out = json::array();
  for (size_t i = 0; i < merges.strings.size(); ++i) {
    const std::string_view m = merges.strings[i];
    const size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string_view::npos;  // where llama.cpp splits it
    if (sp == std::string_view::npos) fail(f, kMerges, "entry " + std::to_string(i) + " " + shown(m) + " is not \"left right\"");
    const std::string left(m.substr(0, sp)), right(m.substr(sp + 1));
    for (const std::string& piece : {left, right, left + right})
      if (!v.ids.count(piece))
        fail(f, kMerges, "entry " + std::to_string(i) + " " + shown(m) + " names " + shown(piece) + ", which is not a token");
    out.push_back({left, right});
  }
  return out;
}

json template_processing(const Vocab& v, int bos, int eos) {
  json single = json::array(), specials = json::object();
  auto special = [&](int id) {
    const std::string& name = v.pieces[size_t(id)];
    single.push_back({{"SpecialToken", {{"id", name}, {"type_id", 0}}}});
    specials[name] = {{"id", name}, {"ids", {id}}, {"tokens", {name}}};
  };
  if (bos >= 0) special(bos);
  single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
  if (eos >= 0) special(eos);
  return {{"type", "TemplateProcessing"}, {"single", single}, {"pair", json::array()}, {"special_tokens", specials}};
}

}  // namespace

json tokenizer_json_from_gguf(const GgufFile& f) {
  const std::string model = f.get_string(kModel);
  if (model != "llama" && model != "gpt2")
    fail(f, kModel, shown(model) + " is not a tokenizer pert reads (llama: SentencePiece BPE; gpt2: byte-level BPE)");
  const bool spm = model == "llama";
  const Vocab v = read_vocab(f);

  PreSpec pre;
  if (!spm) pre = pre_spec(f, f.opt_string(kPre).value_or("default"));  // llama.cpp ignores it for llama

  // Special tokens and what add_special adds, with llama.cpp's defaults.
  const int bos = special_id(f, v, kBos, spm ? 1 : 11), eos = special_id(f, v, kEos, spm ? 2 : 11);
  const int unk = special_id(f, v, kUnk, spm ? 0 : -1);
  special_id(f, v, kPad, -1);  // (read for its type check only: pert pads nothing)
  const bool add_bos = f.opt_bool(kAddBos).value_or(spm || pre.add_bos), add_eos = f.opt_bool(kAddEos).value_or(false);
  if (add_bos && bos < 0) fail(f, kAddBos, "is true, but " + kBos + " names no token");
  if (add_eos && eos < 0) fail(f, kAddEos, "is true, but " + kEos + " names no token");
  const bool add_space = spm && f.opt_bool(kAddSpace).value_or(true);

  json j = json::object();
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  json added = json::array();
  const bool rstrip = rstrips_specials(f);
  for (int i = 0; i < v.n(); ++i) {
    const int t = v.types[size_t(i)];
    const std::string& piece = v.pieces[size_t(i)];
    if (t != kControl && t != kUnknown && t != kUserDefined) continue;
    added.push_back({{"id", i}, {"content", piece}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", rstrip && !kNotStripped.count(piece)}, {"normalized", false},
                     {"special", t != kUserDefined}});
  }
  j["added_tokens"] = std::move(added);

  json vocab = json::object();
  for (int i = 0; i < v.n(); ++i) vocab[v.pieces[size_t(i)]] = i;
  json bpe = {{"type", "BPE"}, {"dropout", nullptr}, {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr}};
  bpe["unk_token"] = spm && unk >= 0 ? json(v.pieces[size_t(unk)]) : json(nullptr);  // byte-level BPE has no use for it
  bpe["fuse_unk"] = spm;
  bpe["byte_fallback"] = spm;
  bpe["ignore_merges"] = pre.ignore_merges;
  bpe["vocab"] = std::move(vocab);
  bpe["merges"] = spm ? spm_merges(v) : gpt2_merges(f, v);
  j["model"] = std::move(bpe);

  if (spm) {  // SentencePiece: "▁" for a space, one in front; the whole text is one BPE word
    const json replace = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSpace}};
    j["normalizer"] = add_space ? json{{"type", "Sequence"}, {"normalizers", {{{"type", "Prepend"}, {"prepend", kSpace}}, replace}}} : replace;
    j["pre_tokenizer"] = nullptr;
    json decoders = {{{"type", "Replace"}, {"pattern", {{"String", kSpace}}}, {"content", " "}}, {{"type", "ByteFallback"}}, {{"type", "Fuse"}}};
    if (add_space) decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
    j["decoder"] = {{"type", "Sequence"}, {"decoders", decoders}};
  } else {
    j["normalizer"] = nullptr;
    j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", pre.steps}};
    j["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
  }
  j["post_processor"] = template_processing(v, add_bos ? bos : -1, add_eos ? eos : -1);
  return j;
}

}  // namespace tokenizer

Tokenizer Tokenizer::from_gguf(const GgufFile& file) {
  // Errors name the GGUF file (and the tokenizer.json keys this file wrote).
  return from_document(tokenizer::tokenizer_json_from_gguf(file), file.path());
}

}  // namespace pert

#include "pert/tokenizer.hpp"

#include <algorithm>
#include <queue>

#include "pert/error.hpp"
#include "pert/json_util.hpp"

namespace pert {

using nlohmann::json;

namespace {

const std::string kMeta = "\xe2\x96\x81";  // "▁" U+2581, SentencePiece's space

// Length of the UTF-8 character that starts with byte c (0 for a continuation or bad byte).
int utf8_len(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c & 0xe0) == 0xc0) return c >= 0xc2 ? 2 : 0;
  if ((c & 0xf0) == 0xe0) return 3;
  if ((c & 0xf8) == 0xf0) return c <= 0xf4 ? 4 : 0;
  return 0;
}

// Length of the valid character at s[i..], 0 if it is malformed or cut short.
size_t utf8_char(std::string_view s, size_t i) {
  const unsigned char c = s[i];
  const int n = utf8_len(c);
  if (n == 0 || i + n > s.size()) return 0;
  for (int k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return 0;
  const unsigned char c1 = s[i + 1 < s.size() ? i + 1 : i];
  if (n == 3 && ((c == 0xe0 && c1 < 0xa0) || (c == 0xed && c1 >= 0xa0))) return 0;  // overlong, surrogate
  if (n == 4 && ((c == 0xf0 && c1 < 0x90) || (c == 0xf4 && c1 >= 0x90))) return 0;  // overlong, > U+10FFFF
  return size_t(n);
}

uint64_t pair_key(int a, int b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  return s;
}

}  // namespace

bool valid_utf8(std::string_view s, size_t* bad_at) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_char(s, i);
    if (n == 0) {
      if (bad_at) *bad_at = i;
      return false;
    }
    i += n;
  }
  return true;
}

Tokenizer Tokenizer::load(const std::filesystem::path& path) { return parse(read_text_file(path), path.string()); }

Tokenizer Tokenizer::parse(std::string_view text, const std::string& where) {
  const json j = parse_json(text, where);
  try {
    return from_json(j, where);
  } catch (const json::exception& e) {  // a field of the wrong JSON type
    throw FormatError(where + ": " + json_error_text(e));
  }
}

Tokenizer Tokenizer::from_json(const json& j, const std::string& where) {
  auto fail = [&](const std::string& what) -> void { throw FormatError(where + ": " + what); };
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object()) fail("expected an object with a \"model\"");
  const json& m = j["model"];
  if (m.value("type", "BPE") != "BPE") fail("model type '" + m.value("type", "") + "' is not supported (pert reads BPE)");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (m.contains(key) && !m[key].is_null() && m[key] != "") fail(std::string("model.") + key + " is not supported");
  if (m.contains("dropout") && !m["dropout"].is_null() && m["dropout"] != 0) fail("model.dropout is not supported");
  if (m.value("ignore_merges", false)) fail("model.ignore_merges is not supported");

  Tokenizer t;
  std::unordered_map<int, std::string> by_id;
  auto add_piece = [&](const std::string& piece, const json& id, const std::string& what) {
    if (!id.is_number_integer() || id.get<long long>() < 0 || id.get<long long>() >= (1 << 24))
      fail(what + " '" + piece + "' has a bad id " + json_brief(id));
    auto [it, fresh] = by_id.emplace(id.get<int>(), piece);
    if (!fresh && it->second != piece)
      fail(what + " '" + piece + "' reuses id " + std::to_string(it->first) + " of '" + it->second + "'");
  };
  if (!m.contains("vocab") || !m["vocab"].is_object()) fail("model.vocab must be an object of piece: id");
  for (const auto& [piece, id] : m["vocab"].items()) add_piece(piece, id, "vocab piece");
  std::vector<std::pair<int, std::string>> added;
  if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
    if (!j["added_tokens"].is_array()) fail("added_tokens must be a list");
    for (const json& a : j["added_tokens"]) {
      if (!a.is_object() || !a.contains("content") || !a["content"].is_string() || !a.contains("id"))
        fail("added_tokens entries need \"id\" and \"content\"");
      add_piece(a["content"], a["id"], "added token");
      if (a.value("special", false)) added.push_back({a["id"].get<int>(), a["content"]});
    }
  }
  int vocab = 0;
  for (const auto& [id, _] : by_id) vocab = std::max(vocab, id + 1);
  if (vocab == 0) fail("model.vocab is empty");
  if (size_t(vocab) != by_id.size()) {  // a gap, found before any table is sized by the largest id
    int gap = 0;
    while (by_id.count(gap)) ++gap;
    fail("no token has id " + std::to_string(gap) + " (ids must run from 0 to " + std::to_string(vocab - 1) + ")");
  }
  t.pieces_.resize(size_t(vocab));
  for (int id = 0; id < vocab; ++id) t.pieces_[size_t(id)] = by_id.at(id);
  for (int id = 0; id < vocab; ++id) t.ids_.emplace(t.pieces_[size_t(id)], id);  // first id wins on duplicates
  t.special_.assign(size_t(vocab), false);
  for (const auto& [id, _] : added) t.special_[size_t(id)] = true;

  t.byte_of_.assign(size_t(vocab), -1);
  std::fill(std::begin(t.byte_token_), std::end(t.byte_token_), -1);
  for (int id = 0; id < vocab; ++id) {
    const std::string& p = t.pieces_[size_t(id)];
    if (p.size() == 6 && p.compare(0, 3, "<0x") == 0 && p[5] == '>' && std::isxdigit((unsigned char)p[3]) &&
        std::isxdigit((unsigned char)p[4])) {
      const int byte = std::stoi(p.substr(3, 2), nullptr, 16);
      t.byte_of_[size_t(id)] = byte;
      if (t.byte_token_[byte] < 0) t.byte_token_[byte] = id;
    }
  }
  t.byte_fallback_ = m.value("byte_fallback", false);
  t.fuse_unk_ = m.value("fuse_unk", false);
  if (m.contains("unk_token") && m["unk_token"].is_string()) {
    auto unk = t.find(m["unk_token"]);
    if (!unk) fail("unk_token '" + m["unk_token"].get<std::string>() + "' is not in the vocabulary");
    t.unk_ = *unk;
  }

  if (!m.contains("merges") || !m["merges"].is_array()) fail("model.merges must be a list");
  int rank = 0;
  for (const json& merge : m["merges"]) {
    std::string left, right;
    if (merge.is_string()) {  // "left right"
      const std::string s = merge;
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) fail("merge " + json_brief(merge) + " is not \"left right\"");
      left = s.substr(0, sp), right = s.substr(sp + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      left = merge[0], right = merge[1];
    } else {
      fail("merge " + json_brief(merge) + " is neither \"left right\" nor [left, right]");
    }
    auto l = t.find(left), r = t.find(right), lr = t.find(left + right);
    if (!l || !r || !lr) fail("merge " + json_brief(merge) + " names a piece that is not in the vocabulary");
    t.merges_.emplace(pair_key(*l, *r), std::make_pair(rank++, *lr));
  }

  // The "▁" convention: a Prepend + Replace normalizer (HF's Llama converter) or a Metaspace
  // pre-tokenizer (older and newer HF files). Anything else would tokenize differently.
  auto metaspace = [&](const json& n, const std::string& what) {
    if (n.value("replacement", kMeta) != kMeta) fail(what + ": only \"▁\" is supported as the Metaspace replacement");
    const std::string scheme = n.contains("prepend_scheme") ? n.value("prepend_scheme", "always")
                                                            : (n.value("add_prefix_space", true) ? "always" : "never");
    if (scheme != "always" && scheme != "first" && scheme != "never") fail(what + ": unknown prepend_scheme '" + scheme + "'");
    t.prefix_space_ = scheme != "never";
    t.space_to_meta_ = true;
    t.split_words_ = n.value("split", true);
  };
  auto normalizer = [&](const json& n, auto& self) -> void {
    if (n.is_null()) return;
    const std::string type = n.is_object() ? n.value("type", "") : "";
    if (type == "Sequence" && n.contains("normalizers") && n["normalizers"].is_array()) {
      for (const json& inner : n["normalizers"]) self(inner, self);
    } else if (type == "Prepend" && n.value("prepend", "") == kMeta) {
      t.prefix_space_ = true;
    } else if (type == "Replace" && n.contains("pattern") && n["pattern"].value("String", "") == " " &&
               n.value("content", "") == kMeta) {
      t.space_to_meta_ = true;
    } else {
      fail("normalizer " + json_brief(n) + " is not supported (pert reads the llama \"▁\" normalizer)");
    }
  };
  if (j.contains("normalizer")) normalizer(j["normalizer"], normalizer);
  if (j.contains("pre_tokenizer") && !j["pre_tokenizer"].is_null()) {
    const json& p = j["pre_tokenizer"];
    const json& mp = p.value("type", "") == "Sequence" && p.contains("pretokenizers") && p["pretokenizers"].size() == 1
                         ? p["pretokenizers"][0] : p;
    if (mp.value("type", "") != "Metaspace") fail("pre_tokenizer " + json_brief(p) + " is not supported (pert reads Metaspace)");
    metaspace(mp, "pre_tokenizer");
  }
  if (!t.space_to_meta_) fail("no \"▁\" space convention (Replace normalizer or Metaspace pre-tokenizer): not a llama/SentencePiece tokenizer");
  return t;
}

std::optional<int> Tokenizer::find(const std::string& piece) const {
  auto it = ids_.find(piece);
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

void Tokenizer::encode_word(std::string_view word, std::vector<int>& out) const {
  struct Symbol {
    int id, prev, next;
  };
  std::vector<Symbol> sym;
  for (size_t i = 0; i < word.size();) {
    const size_t n = utf8_char(word, i);  // validated by encode()
    auto id = find(std::string(word.substr(i, n)));
    if (id) {
      sym.push_back({*id, int(sym.size()) - 1, int(sym.size()) + 1});
    } else {
      for (size_t k = 0; k < n; ++k) {
        const int b = byte_fallback_ ? byte_token_[static_cast<unsigned char>(word[i + k])] : -1;
        if (b < 0 && unk_ < 0) throw Error("tokenizer: character not in the vocabulary and no <unk> token");
        const int token = b >= 0 ? b : unk_;
        if (token == unk_ && fuse_unk_ && !sym.empty() && sym.back().id == unk_) continue;
        sym.push_back({token, int(sym.size()) - 1, int(sym.size()) + 1});
        if (!byte_fallback_ || b < 0) break;  // one <unk> stands for the whole character
      }
    }
    i += n;
  }
  if (sym.empty()) return;
  sym.back().next = -1;

  // Merge the adjacent pair of lowest rank, leftmost first, until none applies (HF's BPE).
  struct Candidate {
    int rank, pos, left, right, merged;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto consider = [&](int i) {
    if (i < 0 || sym[size_t(i)].next < 0) return;
    const int l = sym[size_t(i)].id, r = sym[size_t(sym[size_t(i)].next)].id;
    auto it = merges_.find(pair_key(l, r));
    if (it != merges_.end()) queue.push({it->second.first, i, l, r, it->second.second});
  };
  for (int i = 0; i < int(sym.size()); ++i) consider(i);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& left = sym[size_t(c.pos)];
    if (left.id != c.left || left.next < 0 || sym[size_t(left.next)].id != c.right) continue;  // stale
    Symbol& right = sym[size_t(left.next)];
    left.id = c.merged;
    right.id = -1;
    left.next = right.next;
    if (left.next >= 0) sym[size_t(left.next)].prev = c.pos;
    consider(left.prev);
    consider(c.pos);
  }
  for (int i = 0; i >= 0; i = sym[size_t(i)].next) out.push_back(sym[size_t(i)].id);
}

std::vector<int> Tokenizer::encode(std::string_view text) const {
  size_t bad = 0;
  if (!valid_utf8(text, &bad)) throw Error("tokenizer: input is not valid UTF-8 (byte " + std::to_string(bad) + ")");
  std::vector<int> out;
  if (text.empty()) return out;
  std::string s = space_to_meta_ ? replace_all(std::string(text), " ", kMeta) : std::string(text);
  if (prefix_space_) s = kMeta + s;
  if (!split_words_) {
    encode_word(s, out);
    return out;
  }
  for (size_t start = 0; start < s.size();) {  // words start at each "▁"
    size_t next = s.find(kMeta, start + 1);
    if (next == std::string::npos) next = s.size();
    encode_word(std::string_view(s).substr(start, next - start), out);
    start = next;
  }
  return out;
}

std::string Tokenizer::token_text(int id) const {
  if (id < 0 || id >= vocab_size()) throw Error("tokenizer: token id " + std::to_string(id) + " is outside the vocabulary");
  if (special_[size_t(id)]) return "";
  if (byte_of_[size_t(id)] >= 0) return std::string(1, char(byte_of_[size_t(id)]));
  return replace_all(pieces_[size_t(id)], kMeta, " ");
}

std::string Tokenizer::decode(const std::vector<int>& ids) const {
  std::string out;
  for (int id : ids) out += token_text(id);
  if (prefix_space_ && !out.empty() && out[0] == ' ') out.erase(0, 1);
  return out;
}

std::string StreamDecoder::push(int id) {
  std::string text = tok_.token_text(id);
  if (at_start_ && !text.empty()) {
    at_start_ = false;
    if (tok_.adds_prefix_space() && text[0] == ' ') text.erase(0, 1);
  }
  pending_ += text;
  // Emit everything but an incomplete character at the very end.
  size_t keep = pending_.size();
  for (size_t back = 1; back <= 3 && back <= pending_.size(); ++back) {
    const unsigned char c = pending_[pending_.size() - back];
    if ((c & 0xc0) == 0x80) continue;  // continuation byte: look further back
    const int n = utf8_len(c);
    if (n > int(back)) keep = pending_.size() - back;
    break;
  }
  std::string out = pending_.substr(0, keep);
  pending_.erase(0, keep);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace pert

// Tokenizer: reading tokenizer.json, the encode pipeline, decoding and streaming.
#include "pert/tokenizer.hpp"

#include <algorithm>

#include "pert/error.hpp"
#include "pert/interrupt.hpp"
#include "pert/json_util.hpp"
#include "tokenizer/internal.hpp"

namespace pert {

using tokenizer::Data;
using tokenizer::json;
using tokenizer::Piece;
using tokenizer::Source;

namespace tokenizer {

namespace {
const char* const kReplacementChar = "\xef\xbf\xbd";
}

std::string Source::type_of(const json& j, const std::string& key) const {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) fail(key, "must be an object with a \"type\"");
  return j["type"].get<std::string>();
}

void Data::check_id(int id) const {
  if (id < 0 || size_t(id) >= pieces.size())
    throw Error("tokenizer: token id " + std::to_string(id) + " is outside the vocabulary (" + std::to_string(pieces.size()) + " tokens)");
}

std::string Data::decode(const int* ids, size_t n, bool at_start) const {
  std::vector<std::string> tokens;
  tokens.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    check_id(ids[i]);
    if (present[size_t(ids[i])] && !special[size_t(ids[i])]) tokens.push_back(pieces[size_t(ids[i])]);  // HF skips unused ids
  }
  std::string out;
  if (!decoder) {  // HF without a decoder: the tokens joined by spaces
    for (size_t i = 0; i < tokens.size(); ++i) out += (i > 0 || !at_start ? " " : "") + tokens[i];
    return out;
  }
  decoder->decode(tokens, at_start);
  for (const std::string& t : tokens) out += t;
  return out;
}

namespace {

// The model's vocabulary and the added tokens as one id -> piece table, checked for bad ids,
// clashes and gaps.
void build_vocabulary(Data& d, const json& j, const Source& src) {
  std::unordered_map<int, std::string> by_id;
  auto add_piece = [&](const std::string& piece, int id, const std::string& key, const std::string& what) {
    auto [it, fresh] = by_id.emplace(id, piece);
    if (!fresh && it->second != piece)
      src.fail(key, what + " '" + piece + "' reuses id " + std::to_string(id) + " of '" + it->second + "'");
  };
  std::vector<std::pair<std::string, int>> vocab(d.model->vocab().begin(), d.model->vocab().end());
  std::sort(vocab.begin(), vocab.end());  // deterministic errors
  for (const auto& [piece, id] : vocab) add_piece(piece, id, "model.vocab", "piece");
  if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
    if (!j["added_tokens"].is_array()) src.fail("added_tokens", "must be a list");
    for (size_t i = 0; i < j["added_tokens"].size(); ++i) {
      const json& a = j["added_tokens"][i];
      const std::string key = "added_tokens[" + std::to_string(i) + "]";
      if (!a.is_object() || !a.contains("content") || !a["content"].is_string() || !a.contains("id"))
        src.fail(key, "needs \"id\" and \"content\"");
      const json& id = a["id"];
      if (!id.is_number_integer() || id.get<long long>() < 0 || id.get<long long>() >= (1 << 24))
        src.fail(key, "'" + a["content"].get<std::string>() + "' has a bad id " + json_brief(id));
      tokenizer::AddedToken t{a["content"], id.get<int>(), a.value("special", false), a.value("lstrip", false),
                              a.value("rstrip", false), a.value("single_word", false), false};
      t.normalized = a.value("normalized", !t.special);
      add_piece(t.content, t.id, key, "added token");
      d.added.push_back(t);
    }
  }
  int size = 0;
  for (const auto& [id, _] : by_id) size = std::max(size, id + 1);
  if (size == 0 || d.model->vocab().empty()) src.fail("model.vocab", "is empty");  // added tokens alone encode no text
  // A few unused ids are allowed (gpt-4o's file has 19), not a table sized by one stray large id:
  // that is refused before any table is sized.
  if (size_t(size) - by_id.size() > by_id.size()) {
    int gap = 0;
    while (by_id.count(gap)) ++gap;
    src.fail("model.vocab", "has no token with id " + std::to_string(gap) + " (ids run up to " + std::to_string(size - 1) +
                                ", and more than half of them are unused)");
  }
  d.pieces.resize(size_t(size));
  d.present.assign(size_t(size), false);
  for (auto& [id, piece] : by_id) d.pieces[size_t(id)] = std::move(piece), d.present[size_t(id)] = true;
  d.ids = d.model->vocab();
  d.special.assign(size_t(size), false);
  for (const tokenizer::AddedToken& t : d.added) {
    d.ids[t.content] = t.id;  // an added token's content means that token
    if (t.special) d.special[size_t(t.id)] = true;
  }
}

// tokenizer_config.json's add_bos_token / add_eos_token, for files without a post-processor.
void read_config(Data& d, const std::filesystem::path& path) {
  const std::string where = path.string();
  const json c = parse_json(read_text_file(path, kMaxTokenizerBytes), where);
  if (!c.is_object()) throw FormatError(where + ": expected an object");
  auto token_id = [&](const char* key) {
    const json& t = c.contains(key) ? c[key] : json();
    const json& content = t.is_object() ? t.value("content", json()) : t;
    if (!content.is_string()) throw FormatError(where + ": " + key + " must be a string or {\"content\": ...}");
    auto it = d.ids.find(content.get<std::string>());
    if (it == d.ids.end()) throw FormatError(where + ": " + key + " '" + content.get<std::string>() + "' is not a token of " + d.where);
    return it->second;
  };
  if (c.value("add_bos_token", json(false)) == true) d.specials.prefix = {token_id("bos_token")};
  if (c.value("add_eos_token", json(false)) == true) d.specials.suffix = {token_id("eos_token")};
}

std::shared_ptr<Data> from_json(const json& j, const std::string& where) {
  const Source src{where};
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object()) throw FormatError(where + ": expected an object with a \"model\"");
  for (const char* key : {"truncation", "padding"})
    if (j.contains(key) && !j[key].is_null()) src.fail(key, "is not supported (only null)");
  auto d = std::make_shared<Data>();
  d->where = where;
  d->model = std::make_unique<tokenizer::Bpe>(j["model"], src);
  build_vocabulary(*d, j, src);
  auto present = [&](const char* key) { return j.contains(key) && !j[key].is_null(); };
  if (present("normalizer")) d->normalizer = tokenizer::parse_normalizer(j["normalizer"], src, "normalizer");
  if (present("pre_tokenizer")) d->pre_tokenizer = tokenizer::parse_pre_tokenizer(j["pre_tokenizer"], src, "pre_tokenizer");
  if (present("decoder")) d->decoder = tokenizer::parse_decoder(j["decoder"], src, "decoder", d->stream);
  if (present("post_processor"))
    d->specials = tokenizer::parse_post_processor(j["post_processor"], src, "post_processor", int(d->pieces.size()));
  for (size_t i = 0; i < d->added.size(); ++i) {
    const tokenizer::AddedToken& t = d->added[i];
    if (t.normalized && d->normalizer) {
      std::string pattern = t.content;
      d->normalizer->normalize(pattern);
      d->normalized_matcher.add(pattern, int(i));
    } else {
      d->raw_matcher.add(t.content, int(i));
    }
  }
  return d;
}

}  // namespace
}  // namespace tokenizer

Tokenizer::Tokenizer() : d_(std::make_shared<Data>()) {}

Tokenizer Tokenizer::from_document(const json& j, const std::string& where) {
  Tokenizer t;
  try {
    t.d_ = tokenizer::from_json(j, where);
  } catch (const json::exception& e) {  // a field of the wrong JSON type
    throw FormatError(where + ": " + json_error_text(e));
  }
  return t;
}

Tokenizer Tokenizer::parse(std::string_view text, const std::string& where) { return from_document(parse_json(text, where), where); }

Tokenizer Tokenizer::load(const std::filesystem::path& path) { return parse(read_text_file(path, kMaxTokenizerBytes), path.string()); }

Tokenizer Tokenizer::load_dir(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / "tokenizer.json", config = dir / "tokenizer_config.json";
  const std::string text = read_text_file(path, kMaxTokenizerBytes);
  const json j = parse_json(text, path.string());
  Tokenizer t = parse(text, path.string());
  const bool has_post_processor = j.is_object() && j.contains("post_processor") && !j["post_processor"].is_null();
  if (!has_post_processor && std::filesystem::exists(config)) {
    auto d = std::const_pointer_cast<Data>(t.d_);  // still private to this function
    try {
      tokenizer::read_config(*d, config);
    } catch (const json::exception& e) {
      throw FormatError(config.string() + ": " + json_error_text(e));
    }
  }
  return t;
}

int Tokenizer::vocab_size() const { return int(d_->pieces.size()); }
const std::string& Tokenizer::piece(int id) const { return d_->pieces.at(size_t(id)); }
bool Tokenizer::is_special(int id) const { return d_->special.at(size_t(id)); }
const std::vector<int>& Tokenizer::prefix_special() const { return d_->specials.prefix; }
const std::vector<int>& Tokenizer::suffix_special() const { return d_->specials.suffix; }

std::optional<int> Tokenizer::find(const std::string& piece) const {
  auto it = d_->ids.find(piece);
  if (it == d_->ids.end()) return std::nullopt;
  return it->second;
}

std::vector<int> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  size_t bad = 0;
  if (!valid_utf8(text, &bad)) throw Error("tokenizer: input is not valid UTF-8 (byte " + std::to_string(bad) + ")");
  const Data& d = *d_;
  std::vector<int> out;
  if (add_special) out = d.specials.prefix;
  std::vector<std::pair<Piece, int>> raw_parts, normalized_parts;
  const Piece whole{std::string(text), true};
  if (d.raw_matcher.empty()) raw_parts.push_back({whole, -1});
  else d.raw_matcher.split(whole, d.added, parse_special, raw_parts);
  const tokenizer::PieceSink encode_piece = [&](Piece& p) {
    check_interrupt();  // a text of hundreds of megabytes can be stopped word by word
    d.model->encode(p.text, out);
  };
  for (auto& [part, token] : raw_parts) {
    if (token >= 0) {
      out.push_back(d.added[size_t(token)].id);
      continue;
    }
    if (d.normalizer) d.normalizer->normalize(part.text);
    normalized_parts.clear();
    if (d.normalized_matcher.empty()) normalized_parts.push_back({std::move(part), -1});
    else d.normalized_matcher.split(part, d.added, parse_special, normalized_parts);
    for (auto& [sub, sub_token] : normalized_parts) {
      if (sub_token >= 0) {
        out.push_back(d.added[size_t(sub_token)].id);
        continue;
      }
      if (sub.text.empty()) continue;
      if (d.pre_tokenizer) d.pre_tokenizer->split(sub, encode_piece);
      else encode_piece(sub);
    }
  }
  if (add_special) out.insert(out.end(), d.specials.suffix.begin(), d.specials.suffix.end());
  return out;
}

size_t Tokenizer::dropped_characters() const { return d_->model ? d_->model->dropped() : 0; }

std::string dropped_note(size_t dropped, const std::string& text_name) {
  if (dropped == 0) return "";
  return text_name + ": " + std::to_string(dropped) + (dropped == 1 ? " character" : " characters") +
         " that the tokenizer cannot encode (no piece, no <unk>, no byte fallback) " + (dropped == 1 ? "was" : "were") +
         " left out, as HF's tokenizers leave them out: the ids are of the text without them";
}

std::string Tokenizer::decode(const std::vector<int>& ids) const { return d_->decode(ids.data(), ids.size(), true); }

std::string Tokenizer::token_text(int id) const {
  d_->check_id(id);
  if (d_->special[size_t(id)]) return d_->pieces[size_t(id)];
  return d_->decode(&id, 1, false);
}

// The window of ids since the last restart is decoded whole each time; what is returned is
// the part of its text no later token can change. The window restarts (decoding goes on from
// an empty one, no longer at the start) once its text is complete, when the decoder allows.
StreamDecoder::StreamDecoder(const Tokenizer& tok) : tok_(tok) {
  const Data& d = *tok_.d_;
  if (!d.stream.restartable || d.stream.buffered) return;
  alone_.resize(d.pieces.size());
  for (size_t id = 0; id < alone_.size(); ++id) {
    const int i = int(id);
    if (!d.special[id] && !tokenizer::byte_fallback_token(d.pieces[id])) alone_[id] = d.decode(&i, 1, false);
  }
}

std::string StreamDecoder::advance(bool final) {
  const Data& d = *tok_.d_;
  if (d.stream.buffered && !final) return "";
  // The common step, as the general path below would take it: one ordinary token after a
  // restart whose text is complete (non-empty, no trailing replacement character).
  if (!final && !alone_.empty() && window_.size() == 1 && !at_start_ && emitted_ == 0) {
    const std::string& text = alone_[size_t(window_[0])];
    if (!text.empty() && !(text.size() >= 3 && text.compare(text.size() - 3, 3, tokenizer::kReplacementChar) == 0)) {
      window_.clear();
      return text;
    }
  }
  size_t n = window_.size();
  if (!final && d.stream.byte_fallback)  // a trailing <0xNN> run may still grow (ids decoded to nothing don't end it)
    while (n > 0) {
      const size_t id = size_t(window_[n - 1]);
      if (!d.special[id] && d.present[id] && !tokenizer::byte_fallback_token(d.pieces[id])) break;
      --n;
    }
  const std::string text = d.decode(window_.data(), n, at_start_);
  size_t stable = text.size();
  if (!final)  // a replacement character may be an incomplete UTF-8 character
    while (stable >= 3 && text.compare(stable - 3, 3, tokenizer::kReplacementChar) == 0) stable -= 3;
  std::string out = stable > emitted_ ? text.substr(emitted_, stable - emitted_) : "";
  emitted_ = std::max(emitted_, stable);
  const bool complete = n == window_.size() && stable == text.size() && !text.empty();
  if (final || (complete && d.stream.restartable && !d.stream.buffered)) {
    if (!text.empty()) at_start_ = false;
    window_.clear();
    emitted_ = 0;
  }
  return out;
}

std::string StreamDecoder::push(int id) {
  tok_.d_->check_id(id);
  window_.push_back(id);
  return advance(false);
}

std::string StreamDecoder::flush() { return advance(true); }

void StreamDecoder::prime(const std::vector<int>& context) {
  window_ = context;
  at_start_ = true;
  emitted_ = 0;
  for (int id : context) tok_.d_->check_id(id);
  advance(false);
  if (!window_.empty()) emitted_ = tok_.d_->decode(window_.data(), window_.size(), at_start_).size();  // all of it was shown
}

}  // namespace pert

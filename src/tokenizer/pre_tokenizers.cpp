// Pre-tokenizers: each splits a piece into parts, with HF's split behaviours, streaming them.
#include <algorithm>

#include "pert/tokenizer.hpp"
#include "tokenizer/internal.hpp"

namespace pert::tokenizer {

namespace {

enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

// HF's NormalizedString::split, streamed: the pattern's matches in `in.text` arrive in order
// through match(), and each part is handed to the sink as soon as no later match can change
// it; empty parts are dropped. With `invert` the text between the matches is what matched.
class Splitter {
 public:
  Splitter(const Piece& in, bool invert, Behavior behavior, const PieceSink& sink)
      : in_(in), invert_(invert), behavior_(behavior), sink_(sink) {}
  void match(size_t start, size_t end) {
    if (prev_ != start) segment(prev_, start, invert_);
    segment(start, end, !invert_);
    prev_ = end;
  }
  void finish() {
    if (prev_ != in_.text.size()) segment(prev_, in_.text.size(), invert_);
    if (held_) emit(held_start_, held_end_);
  }

 private:
  const Piece& in_;
  bool invert_;
  Behavior behavior_;
  const PieceSink& sink_;
  size_t prev_ = 0;
  bool previous_match_ = false;
  bool held_ = false;  // a part that the next segment may still extend
  size_t held_start_ = 0, held_end_ = 0;
  Piece part_;

  void hold(size_t start, size_t end) {
    if (held_) emit(held_start_, held_end_);
    held_ = true, held_start_ = start, held_end_ = end;
  }
  void segment(size_t start, size_t end, bool match) {
    switch (behavior_) {
      case Behavior::Removed:
        if (!match) emit(start, end);
        break;
      case Behavior::Isolated:
        emit(start, end);
        break;
      case Behavior::Contiguous:  // runs of matches, and runs of the rest, as one part each
        if (held_ && match == previous_match_) held_end_ = end;
        else hold(start, end);
        break;
      case Behavior::MergedWithPrevious:  // a match joins the part before it
        if (held_ && match && !previous_match_) held_end_ = end;
        else hold(start, end);
        break;
      case Behavior::MergedWithNext:  // a match joins the part after it, unless that is a match
        if (held_ && !match && previous_match_) {
          emit(held_start_, end);
          held_ = false;
        } else if (match) {
          hold(start, end);
        } else {
          emit(start, end);
        }
        break;
    }
    previous_match_ = match;
  }
  void emit(size_t start, size_t end) {
    if (end == start) return;
    part_.text.assign(in_.text, start, end - start);
    part_.at_start = in_.at_start && start == 0;
    sink_(part_);
  }
};

// Splits `in` at every character for which `pred` holds (HF's Fn(char) pattern).
template <class Pred>
void split_chars(const Piece& in, Pred pred, Behavior behavior, const PieceSink& sink) {
  Splitter splitter(in, false, behavior, sink);
  const std::string& s = in.text;
  for (size_t i = 0; i < s.size();) {
    const size_t at = i;
    if (pred(utf8_decode(s, i))) splitter.match(at, i);
  }
  splitter.finish();
}

struct Split : PreTokenizer {
  Pattern pattern;
  Behavior behavior;
  bool invert;
  Split(Pattern p, Behavior b, bool i) : pattern(std::move(p)), behavior(b), invert(i) {}
  void split(Piece& piece, const PieceSink& sink) const override {
    Splitter splitter(piece, invert, behavior, sink);
    pattern.for_each_match(piece.text, [&](size_t start, size_t end) { splitter.match(start, end); });
    splitter.finish();
  }
};

const Regex& gpt2_regex() {
  static const Regex re(R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)",
                        "the ByteLevel pre-tokenizer's GPT-2 regex");
  return re;
}

struct ByteLevel : PreTokenizer {
  bool add_prefix_space, use_regex;
  ByteLevel(bool a, bool u) : add_prefix_space(a), use_regex(u) {}
  void split(Piece& piece, const PieceSink& sink) const override {
    if (add_prefix_space && (piece.text.empty() || piece.text[0] != ' ')) piece.text.insert(0, " ");
    std::string mapped;
    const PieceSink map_bytes = [&](Piece& part) {  // each byte as its printable character
      mapped.clear();
      mapped.reserve(2 * part.text.size());
      for (unsigned char b : part.text) mapped += byte_to_char(b);
      part.text.swap(mapped);
      sink(part);
    };
    if (!use_regex) {
      if (!piece.text.empty()) map_bytes(piece);
      return;
    }
    Splitter splitter(piece, false, Behavior::Isolated, map_bytes);
    gpt2_regex().for_each_match(piece.text, [&](size_t start, size_t end) { splitter.match(start, end); });
    splitter.finish();
  }
};

struct Digits : PreTokenizer {
  bool individual;
  explicit Digits(bool i) : individual(i) {}
  void split(Piece& piece, const PieceSink& sink) const override {
    split_chars(piece, is_numeric, individual ? Behavior::Isolated : Behavior::Contiguous, sink);
  }
};

struct WhitespaceSplit : PreTokenizer {
  void split(Piece& piece, const PieceSink& sink) const override { split_chars(piece, is_whitespace, Behavior::Removed, sink); }
};

enum class PrependScheme { Always, First, Never };

struct Metaspace : PreTokenizer {
  std::string replacement;
  PrependScheme scheme;
  bool split_words;
  Metaspace(std::string r, PrependScheme s, bool w) : replacement(std::move(r)), scheme(s), split_words(w) {}
  void split(Piece& piece, const PieceSink& sink) const override {
    std::string text;
    text.reserve(piece.text.size() + 8);
    for (char c : piece.text) c == ' ' ? text += replacement : text += c;
    const bool starts = text.compare(0, replacement.size(), replacement) == 0;
    if (!starts && (scheme == PrependScheme::Always || (scheme == PrependScheme::First && piece.at_start)))
      text.insert(0, replacement);
    piece.text.swap(text);
    if (!split_words) {
      if (!piece.text.empty()) sink(piece);
      return;
    }
    Splitter splitter(piece, false, Behavior::MergedWithNext, sink);
    for (size_t at = piece.text.find(replacement); at != std::string::npos; at = piece.text.find(replacement, at + replacement.size()))
      splitter.match(at, at + replacement.size());
    splitter.finish();
  }
};

// Each step splits the parts of the one before; the chain of sinks is built once per text.
struct Sequence : PreTokenizer {
  std::vector<std::unique_ptr<PreTokenizer>> steps;
  void split(Piece& piece, const PieceSink& sink) const override {
    if (steps.empty()) return sink(piece);
    std::vector<PieceSink> into(steps.size());  // into[i]: what step i hands its parts to
    into.back() = sink;
    for (size_t i = steps.size() - 1; i-- > 0;) into[i] = [&, i](Piece& part) { steps[i + 1]->split(part, into[i + 1]); };
    steps[0]->split(piece, into[0]);
  }
};

Behavior parse_behavior(const json& j, const Source& src, const std::string& key) {
  const std::string b = j.is_string() ? j.get<std::string>() : "";
  if (b == "Removed") return Behavior::Removed;
  if (b == "Isolated") return Behavior::Isolated;
  if (b == "MergedWithPrevious") return Behavior::MergedWithPrevious;
  if (b == "MergedWithNext") return Behavior::MergedWithNext;
  if (b == "Contiguous") return Behavior::Contiguous;
  src.fail(key, json(j).dump() + " is not a split behavior (Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous)");
}

}  // namespace

std::unique_ptr<PreTokenizer> parse_pre_tokenizer(const json& j, const Source& src, const std::string& key) {
  const std::string type = src.type_of(j, key);
  if (type == "Split")
    return std::make_unique<Split>(Pattern(j.value("pattern", json()), src, key + ".pattern"),
                                   parse_behavior(j.value("behavior", json()), src, key + ".behavior"), j.value("invert", false));
  if (type == "ByteLevel") return std::make_unique<ByteLevel>(j.value("add_prefix_space", true), j.value("use_regex", true));
  if (type == "Digits") return std::make_unique<Digits>(j.value("individual_digits", false));
  if (type == "WhitespaceSplit") return std::make_unique<WhitespaceSplit>();
  if (type == "Whitespace") {
    static const Pattern words(json{{"Regex", R"(\w+|[^\w\s]+)"}}, Source{"the Whitespace pre-tokenizer"}, "pattern");
    return std::make_unique<Split>(words, Behavior::Removed, true);
  }
  if (type == "Metaspace") {
    const std::string replacement = j.value("replacement", "\xe2\x96\x81");
    if (utf8_length(replacement) != 1) src.fail(key + ".replacement", "must be one character");
    PrependScheme scheme = j.value("add_prefix_space", true) ? PrependScheme::Always : PrependScheme::Never;
    if (j.contains("prepend_scheme")) {
      const std::string s = j["prepend_scheme"].is_string() ? j["prepend_scheme"].get<std::string>() : "";
      if (s == "always") scheme = PrependScheme::Always;
      else if (s == "first") scheme = PrependScheme::First;
      else if (s == "never") scheme = PrependScheme::Never;
      else src.fail(key + ".prepend_scheme", j["prepend_scheme"].dump() + " is not always, first or never");
    }
    return std::make_unique<Metaspace>(replacement, scheme, j.value("split", true));
  }
  if (type == "Sequence") {
    if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array()) src.fail(key + ".pretokenizers", "must be a list");
    auto seq = std::make_unique<Sequence>();
    for (size_t i = 0; i < j["pretokenizers"].size(); ++i)
      seq->steps.push_back(parse_pre_tokenizer(j["pretokenizers"][i], src, key + ".pretokenizers[" + std::to_string(i) + "]"));
    return seq;
  }
  src.fail(key + ".type", "'" + type + "' is not supported");
}

}  // namespace pert::tokenizer

// Pre-tokenizers: each splits every piece into parts, with HF's split behaviours.
#include <algorithm>

#include "internal.hpp"
#include "pert/tokenizer.hpp"

namespace pert::tokenizer {

namespace {

using Ranges = std::vector<std::pair<size_t, size_t>>;

enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

// HF's NormalizedString::split: `found` are the pattern's matches in `in.text`; with `invert`
// the text between them is what matched. Parts are appended to `out`, empty ones dropped.
void split_piece(const Piece& in, const Ranges& found, bool invert, Behavior behavior, std::vector<Piece>& out) {
  struct Segment {
    size_t start, end;
    bool match;
  };
  thread_local std::vector<Segment> segments, parts;
  segments.clear();
  size_t prev = 0;
  for (const auto& [start, end] : found) {
    if (prev != start) segments.push_back({prev, start, invert});
    segments.push_back({start, end, !invert});
    prev = end;
  }
  if (prev != in.text.size()) segments.push_back({prev, in.text.size(), invert});

  parts.clear();  // here `match` means "remove"
  bool previous_match = false;
  switch (behavior) {
    case Behavior::Removed:
      parts = segments;
      break;
    case Behavior::Isolated:
      for (const Segment& s : segments) parts.push_back({s.start, s.end, false});
      break;
    case Behavior::Contiguous:
      for (const Segment& s : segments) {
        if (s.match == previous_match && !parts.empty()) parts.back().end = s.end;
        else parts.push_back({s.start, s.end, false});
        previous_match = s.match;
      }
      break;
    case Behavior::MergedWithPrevious:
      for (const Segment& s : segments) {
        if (s.match && !previous_match && !parts.empty()) parts.back().end = s.end;
        else parts.push_back({s.start, s.end, false});
        previous_match = s.match;
      }
      break;
    case Behavior::MergedWithNext:
      for (size_t i = segments.size(); i-- > 0;) {
        const Segment& s = segments[i];
        if (s.match && !previous_match && !parts.empty()) parts.back().start = s.start;
        else parts.push_back({s.start, s.end, false});
        previous_match = s.match;
      }
      std::reverse(parts.begin(), parts.end());
      break;
  }
  for (const Segment& p : parts)
    if (!p.match && p.end > p.start) out.push_back({in.text.substr(p.start, p.end - p.start), in.at_start && p.start == 0});
}

// Every character for which `pred` holds, as a match of its own (HF's Fn(char) pattern).
template <class Pred>
void find_chars(std::string_view s, Pred pred, Ranges& out) {
  out.clear();
  for (size_t i = 0; i < s.size();) {
    const size_t at = i;
    if (pred(utf8_decode(s, i))) out.emplace_back(at, i);
  }
}

// Applies `one` to each piece in turn.
template <class One>
void split_each(std::vector<Piece>& pieces, One one) {
  std::vector<Piece> out;
  out.reserve(pieces.size());
  for (Piece& p : pieces) one(p, out);
  pieces.swap(out);
}

struct Split : PreTokenizer {
  Pattern pattern;
  Behavior behavior;
  bool invert;
  Split(Pattern p, Behavior b, bool i) : pattern(std::move(p)), behavior(b), invert(i) {}
  void split(std::vector<Piece>& pieces) const override {
    Ranges found;
    split_each(pieces, [&](const Piece& p, std::vector<Piece>& out) {
      pattern.find_all(p.text, found);
      split_piece(p, found, invert, behavior, out);
    });
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
  void split(std::vector<Piece>& pieces) const override {
    Ranges found;
    split_each(pieces, [&](Piece& p, std::vector<Piece>& out) {
      if (add_prefix_space && (p.text.empty() || p.text[0] != ' ')) p.text.insert(0, " ");
      const size_t first = out.size();
      if (use_regex) {
        gpt2_regex().find_all(p.text, found);
        split_piece(p, found, false, Behavior::Isolated, out);
      } else if (!p.text.empty()) {
        out.push_back(std::move(p));
      }
      for (size_t i = first; i < out.size(); ++i) {  // each byte as its printable character
        std::string mapped;
        mapped.reserve(out[i].text.size() * 2);
        for (unsigned char b : out[i].text) mapped += byte_to_char(b);
        out[i].text.swap(mapped);
      }
    });
  }
};

struct Digits : PreTokenizer {
  bool individual;
  explicit Digits(bool i) : individual(i) {}
  void split(std::vector<Piece>& pieces) const override {
    Ranges found;
    split_each(pieces, [&](const Piece& p, std::vector<Piece>& out) {
      find_chars(p.text, is_numeric, found);
      split_piece(p, found, false, individual ? Behavior::Isolated : Behavior::Contiguous, out);
    });
  }
};

struct WhitespaceSplit : PreTokenizer {
  void split(std::vector<Piece>& pieces) const override {
    Ranges found;
    split_each(pieces, [&](const Piece& p, std::vector<Piece>& out) {
      find_chars(p.text, is_whitespace, found);
      split_piece(p, found, false, Behavior::Removed, out);
    });
  }
};

enum class PrependScheme { Always, First, Never };

struct Metaspace : PreTokenizer {
  std::string replacement;
  PrependScheme scheme;
  bool split_words;
  Metaspace(std::string r, PrependScheme s, bool w) : replacement(std::move(r)), scheme(s), split_words(w) {}
  void split(std::vector<Piece>& pieces) const override {
    Ranges found;
    split_each(pieces, [&](Piece& p, std::vector<Piece>& out) {
      std::string text;
      text.reserve(p.text.size() + 8);
      for (char c : p.text) c == ' ' ? text += replacement : text += c;
      const bool starts = text.compare(0, replacement.size(), replacement) == 0;
      if (!starts && (scheme == PrependScheme::Always || (scheme == PrependScheme::First && p.at_start)))
        text.insert(0, replacement);
      p.text.swap(text);
      if (!split_words) {
        if (!p.text.empty()) out.push_back(std::move(p));
        return;
      }
      found.clear();
      for (size_t at = p.text.find(replacement); at != std::string::npos; at = p.text.find(replacement, at + replacement.size()))
        found.emplace_back(at, at + replacement.size());
      split_piece(p, found, false, Behavior::MergedWithNext, out);
    });
  }
};

struct Sequence : PreTokenizer {
  std::vector<std::unique_ptr<PreTokenizer>> steps;
  void split(std::vector<Piece>& pieces) const override {
    for (const auto& step : steps) step->split(pieces);
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

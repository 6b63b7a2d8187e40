// Decoders: HF's decode_chain over the tokens' strings, and how each chain can stream.
#include "pert/tokenizer.hpp"
#include "tokenizer/internal.hpp"

namespace pert::tokenizer {

namespace {

const char* const kReplacementChar = "\xef\xbf\xbd";

struct ByteLevel : Decoder {
  void decode(std::vector<std::string>& tokens, bool) const override {
    std::string bytes;
    for (const std::string& t : tokens) {
      const size_t mark = bytes.size();
      bool all = true;
      for (size_t i = 0; i < t.size() && all;) {
        const int b = char_to_byte(utf8_decode(t, i));
        if (b < 0) all = false;
        else bytes += char(b);
      }
      if (!all) bytes.replace(mark, std::string::npos, t);  // not byte-level text: as it is
    }
    tokens.assign(1, utf8_lossy(bytes));
  }
};

struct Fuse : Decoder {
  void decode(std::vector<std::string>& tokens, bool) const override {
    std::string all;
    for (const std::string& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

struct ByteFallback : Decoder {
  void decode(std::vector<std::string>& tokens, bool) const override {
    std::vector<std::string> out;
    std::string run;
    auto end_run = [&] {
      if (run.empty()) return;
      if (pert::valid_utf8(run)) out.push_back(run);
      else out.insert(out.end(), run.size(), kReplacementChar);  // one per byte, as HF
      run.clear();
    };
    for (std::string& t : tokens) {
      unsigned char b = 0;
      if (byte_fallback_token(t, &b)) {
        run += char(b);
      } else {
        end_run();
        out.push_back(std::move(t));
      }
    }
    end_run();
    tokens.swap(out);
  }
};

struct Strip : Decoder {
  char32_t content;
  size_t start, stop;
  bool fused;  // after Fuse/ByteLevel the one token is the text: its start is the text's start
  Strip(char32_t c, size_t a, size_t b, bool f) : content(c), start(a), stop(b), fused(f) {}
  void decode(std::vector<std::string>& tokens, bool at_start) const override {
    std::vector<std::pair<char32_t, size_t>> chars;  // (character, byte offset)
    for (std::string& t : tokens) {
      chars.clear();
      for (size_t i = 0; i < t.size();) {
        const size_t at = i;
        chars.emplace_back(utf8_decode(t, i), at);
      }
      size_t cut_start = 0, cut_stop = chars.size();
      if (!fused || at_start)
        for (size_t i = 0; i < start && i < chars.size() && chars[i].first == content; ++i) cut_start = i + 1;
      for (size_t i = 0; i < stop && i < chars.size() && chars[chars.size() - 1 - i].first == content; ++i) cut_stop = chars.size() - 1 - i;
      cut_stop = std::max(cut_stop, cut_start);
      const size_t begin = cut_start < chars.size() ? chars[cut_start].second : t.size();
      const size_t end = cut_stop < chars.size() ? chars[cut_stop].second : t.size();
      t = t.substr(begin, end - begin);
    }
  }
};

struct Metaspace : Decoder {
  std::string replacement;
  bool drops_first;  // prepend_scheme is not "never": the first token's "▁" are the added space
  Metaspace(std::string r, bool d) : replacement(std::move(r)), drops_first(d) {}
  void decode(std::vector<std::string>& tokens, bool at_start) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      const std::string& t = tokens[i];
      for (size_t at = 0; at < t.size();) {
        if (t.compare(at, replacement.size(), replacement) == 0) {
          if (!(i == 0 && at_start && drops_first)) out += ' ';
          at += replacement.size();
        } else {
          out += t[at++];
        }
      }
      tokens[i].swap(out);
    }
  }
};

struct Replace : Decoder {
  Pattern pattern;
  std::string content;
  Replace(Pattern p, std::string c) : pattern(std::move(p)), content(std::move(c)) {}
  void decode(std::vector<std::string>& tokens, bool) const override {
    for (std::string& t : tokens) t = replace_all(t, pattern, content);
  }
};

struct Sequence : Decoder {
  std::vector<std::unique_ptr<Decoder>> steps;
  void decode(std::vector<std::string>& tokens, bool at_start) const override {
    for (const auto& step : steps) step->decode(tokens, at_start);
  }
};

// Whether `s` contains a character of "<0xNN>" tokens (so a step could make or break one).
bool touches_byte_tokens(std::string_view s) { return s.find_first_of("<>x0123456789abcdefABCDEF") != std::string_view::npos; }

struct ChainState {
  bool fused = false;           // tokens have been joined into one
  bool alters_tokens = false;   // an earlier step could turn a token into "<0xNN>" or back
};

std::unique_ptr<Decoder> parse(const json& j, const Source& src, const std::string& key, StreamTraits& traits, ChainState& chain) {
  const std::string type = src.type_of(j, key);
  if (type == "ByteLevel" || type == "Fuse") {
    chain.fused = true;
    if (type == "ByteLevel") return std::make_unique<ByteLevel>();
    return std::make_unique<Fuse>();
  }
  if (type == "ByteFallback") {
    if (chain.fused || chain.alters_tokens) traits.buffered = true;
    traits.byte_fallback = true;
    return std::make_unique<ByteFallback>();
  }
  if (type == "Strip") {
    const std::string content = j.value("content", " ");
    if (utf8_length(content) != 1) src.fail(key + ".content", "must be one character");
    const long long start = j.value("start", 0LL), stop = j.value("stop", 0LL);
    if (start < 0 || stop < 0) src.fail(key, "start and stop must be >= 0");
    if (chain.fused && stop > 0) traits.restartable = false;
    if (touches_byte_tokens(content)) chain.alters_tokens = true;
    size_t i = 0;
    return std::make_unique<Strip>(utf8_decode(content, i), size_t(start), size_t(stop), chain.fused);
  }
  if (type == "Metaspace") {
    const std::string replacement = j.value("replacement", "\xe2\x96\x81");
    if (utf8_length(replacement) != 1) src.fail(key + ".replacement", "must be one character");
    bool drops = j.value("add_prefix_space", true);
    if (j.contains("prepend_scheme")) drops = j["prepend_scheme"] != "never";
    if (chain.fused) traits.restartable = false;
    if (touches_byte_tokens(replacement)) chain.alters_tokens = true;
    return std::make_unique<Metaspace>(replacement, drops);
  }
  if (type == "Replace") {
    if (!j.contains("content") || !j["content"].is_string()) src.fail(key + ".content", "must be a string");
    Pattern pattern(j.value("pattern", json()), src, key + ".pattern");
    const std::string content = j["content"].get<std::string>();
    if (chain.fused && !pattern.single_char()) traits.buffered = true;  // could match across tokens
    if (pattern.is_regex() || touches_byte_tokens(pattern.literal()) || touches_byte_tokens(content)) chain.alters_tokens = true;
    return std::make_unique<Replace>(std::move(pattern), content);
  }
  if (type == "Sequence") {
    if (!j.contains("decoders") || !j["decoders"].is_array()) src.fail(key + ".decoders", "must be a list");
    auto seq = std::make_unique<Sequence>();
    for (size_t i = 0; i < j["decoders"].size(); ++i)
      seq->steps.push_back(parse(j["decoders"][i], src, key + ".decoders[" + std::to_string(i) + "]", traits, chain));
    return seq;
  }
  src.fail(key + ".type", "'" + type + "' is not supported");
}

}  // namespace

bool byte_fallback_token(std::string_view t, unsigned char* byte) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return false;
  auto hex = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1; };
  const int hi = hex(t[3]), lo = hex(t[4]);
  if (hi < 0 || lo < 0) return false;
  if (byte) *byte = static_cast<unsigned char>(hi * 16 + lo);
  return true;
}

std::unique_ptr<Decoder> parse_decoder(const json& j, const Source& src, const std::string& key, StreamTraits& traits) {
  ChainState chain;
  return parse(j, src, key, traits, chain);
}

}  // namespace pert::tokenizer

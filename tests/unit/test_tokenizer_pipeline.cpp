// Each stage of the tokenizer.json pipeline on small hand-written files: normalizers,
// pre-tokenizers, BPE options, added-token flags, post-processors, decoders and streaming.
// Expected ids follow from HF tokenizers' documented semantics, worked out in the comments.
#include <algorithm>
#include <map>
#include <set>

#include "pert/error.hpp"
#include "pert/tokenizer.hpp"
#include "test_util.hpp"
#include "tokenizer/internal.hpp"

using namespace pert;

namespace {

using Merges = std::vector<std::pair<std::string, std::string>>;

// A BPE tokenizer.json: `pieces` get ids 0, 1, ...; merges in rank order.
json bpe(const std::vector<std::string>& pieces, const Merges& merges = {}) {
  json vocab = json::object(), m = json::array();
  for (size_t i = 0; i < pieces.size(); ++i) vocab[pieces[i]] = i;
  for (const auto& [l, r] : merges) m.push_back({l, r});
  return {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", m}}}};
}

Tokenizer make(const json& j) { return Tokenizer::parse(j.dump(), "tok.json"); }

std::vector<int> ids(const Tokenizer& t, const std::vector<std::string>& pieces) {
  std::vector<int> out;
  for (const std::string& p : pieces) {
    INFO(p);
    REQUIRE(t.find(p));
    out.push_back(*t.find(p));
  }
  return out;
}

json split(const json& pattern, const std::string& behavior, bool invert = false) {
  return {{"type", "Split"}, {"pattern", pattern}, {"behavior", behavior}, {"invert", invert}};
}


// GPT-2's byte-level alphabet: printable bytes stand for themselves, the others get U+0100...
std::string gpt2_char(int b) {
  int extra = 0;
  for (int x = 0; x < b; ++x) extra += !((x >= '!' && x <= '~') || (x >= 0xa1 && x <= 0xac) || (x >= 0xae && x <= 0xff));
  const bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  const unsigned cp = printable ? unsigned(b) : 256u + unsigned(extra);
  if (cp < 0x80) return std::string(1, char(cp));
  return {char(0xc0 | (cp >> 6)), char(0x80 | (cp & 0x3f))};
}

}  // namespace

TEST_CASE("tokenizer pipeline: normalizers", "[tokenizer]") {
  json j = bpe({"<unk>", "a", "b", "e", "\xc3\xa9", "\xcc\x81", "f", "i", "\xcc\x87", M, " ", "x"});
  j["model"]["unk_token"] = "<unk>";
  auto with = [&](const json& n) {
    json k = j;
    k["normalizer"] = n;
    return make(k);
  };
  CHECK(with({{"type", "NFC"}}).encode("e\xcc\x81") == ids(make(j), {"\xc3\xa9"}));  // e + ◌́ -> é
  CHECK(with({{"type", "NFD"}}).encode("\xc3\xa9") == ids(make(j), {"e", "\xcc\x81"}));
  CHECK(with({{"type", "NFKC"}}).encode("\xef\xac\x81") == ids(make(j), {"f", "i"}));  // ﬁ
  CHECK(with({{"type", "NFKD"}}).encode("\xef\xac\x81\xc3\xa9") == ids(make(j), {"f", "i", "e", "\xcc\x81"}));
  CHECK(with({{"type", "Lowercase"}}).encode("AB") == ids(make(j), {"a", "b"}));
  CHECK(with({{"type", "Lowercase"}}).encode("\xc4\xb0") == ids(make(j), {"i", "\xcc\x87"}));  // İ -> i + ◌̇
  CHECK(with({{"type", "Strip"}, {"strip_left", true}, {"strip_right", false}}).encode("  ab ") == ids(make(j), {"a", "b", " "}));
  CHECK(with({{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}}).encode(" \t ab \n") == ids(make(j), {"a", "b"}));
  CHECK(with({{"type", "Prepend"}, {"prepend", M}}).encode("ab") == ids(make(j), {M, "a", "b"}));
  CHECK(with({{"type", "Prepend"}, {"prepend", M}}).encode("").empty());
  CHECK(with({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", M}}).encode("a b") == ids(make(j), {"a", M, "b"}));
  CHECK(with({{"type", "Replace"}, {"pattern", {{"Regex", "x+"}}}, {"content", "b"}}).encode("axxxa") == ids(make(j), {"a", "b", "a"}));
  const json seq = {{"type", "Sequence"},
                    {"normalizers",
                     {{{"type", "Lowercase"}}, {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", M}}, {{"type", "Prepend"}, {"prepend", M}}}}};
  CHECK(with(seq).encode("A B") == ids(make(j), {M, "a", M, "b"}));
  CHECK(with({{"type", "NFC"}}).encode("q") == ids(make(j), {"<unk>"}));  // a character with no token
  REQUIRE_THROWS_NAMING(with({{"type", "Precompiled"}}), FormatError, "tok.json: normalizer.type 'Precompiled' is not supported");
  REQUIRE_THROWS_NAMING(with({{"type", "Replace"}, {"pattern", {{"Regex", "[a"}}}, {"content", ""}}), FormatError,
                        "tok.json", "normalizer.pattern.Regex", "invalid regex");
}

TEST_CASE("tokenizer pipeline: Split behaviours", "[tokenizer]") {
  // Without a pre-tokenizer "a b" merges a+" " (rank 0), then "a "+b (rank 2) into "a b".
  const json j = bpe({"a", "b", " ", "a ", " b", "a b", "  "}, {{"a", " "}, {" ", "b"}, {"a ", "b"}, {" ", " "}});
  auto with = [&](const json& p) {
    json k = j;
    k["pre_tokenizer"] = p;
    return make(k);
  };
  const Tokenizer plain = make(j);
  const json space = {{"String", " "}};
  CHECK(plain.encode("a b") == ids(plain, {"a b"}));
  CHECK(with(split(space, "Removed")).encode("a b") == ids(plain, {"a", "b"}));
  CHECK(with(split(space, "Isolated")).encode("a b") == ids(plain, {"a", " ", "b"}));
  CHECK(with(split(space, "MergedWithPrevious")).encode("a b") == ids(plain, {"a ", "b"}));
  CHECK(with(split(space, "MergedWithNext")).encode("a b") == ids(plain, {"a", " b"}));
  CHECK(with(split(space, "Isolated")).encode("a  b") == ids(plain, {"a", " ", " ", "b"}));
  CHECK(with(split(space, "Contiguous")).encode("a  b") == ids(plain, {"a", "  ", "b"}));  // two delimiters, one part
  CHECK(with(split({{"Regex", "[ab]"}}, "Removed", true)).encode("a b") == ids(plain, {"a", "b"}));  // invert: the letters are kept
  CHECK(with(split({{"Regex", "\\s+"}}, "Isolated")).encode("a  b") == ids(plain, {"a", "  ", "b"}));
  // HF's own example (SplitDelimiterBehavior's documentation): "the-final--countdown" on "-".
  const json words = bpe({"t", "h", "e", "f", "i", "n", "a", "l", "c", "o", "u", "d", "w", "-", "th", "the", "fi", "fin", "fina",
                          "final", "co", "cou", "coun", "count", "countd", "countdo", "countdow", "countdown", "the-", "final-",
                          "-final", "-countdown", "--", "-the"},
                         {{"t", "h"}, {"th", "e"}, {"f", "i"}, {"fi", "n"}, {"fin", "a"}, {"fina", "l"}, {"c", "o"}, {"co", "u"},
                          {"cou", "n"}, {"coun", "t"}, {"count", "d"}, {"countd", "o"}, {"countdo", "w"}, {"countdow", "n"},
                          {"the", "-"}, {"final", "-"}, {"-", "final"}, {"-", "countdown"}, {"-", "-"}, {"-", "the"}});
  auto parts = [&](const std::string& behavior, const std::string& text, bool invert = false) {
    json k = words;
    k["pre_tokenizer"] = split({{"String", "-"}}, behavior, invert);
    return make(k).encode(text);
  };
  const Tokenizer w = make(words);
  const std::string text = "the-final--countdown";
  CHECK(parts("Removed", text) == ids(w, {"the", "final", "countdown"}));
  CHECK(parts("Isolated", text) == ids(w, {"the", "-", "final", "-", "-", "countdown"}));
  CHECK(parts("MergedWithPrevious", text) == ids(w, {"the-", "final-", "-", "countdown"}));
  CHECK(parts("MergedWithNext", text) == ids(w, {"the", "-final", "-", "-countdown"}));
  CHECK(parts("Contiguous", text) == ids(w, {"the", "-", "final", "--", "countdown"}));
  // Delimiters at both ends; and with invert the words are the matches.
  CHECK(parts("MergedWithNext", "--the-") == ids(w, {"-", "-the", "-"}));
  CHECK(parts("MergedWithPrevious", "--the-") == ids(w, {"-", "-", "the-"}));
  CHECK(parts("Contiguous", "--the-") == ids(w, {"--", "the", "-"}));
  CHECK(parts("MergedWithNext", "the-final", true) == ids(w, {"the-", "final"}));
  CHECK(parts("MergedWithPrevious", "the-final", true) == ids(w, {"the", "-final"}));
  CHECK(parts("MergedWithPrevious", "-countdown-", true) == ids(w, {"-countdown", "-"}));
  REQUIRE_THROWS_NAMING(with(split(space, "Sideways")), FormatError, "tok.json: pre_tokenizer.behavior", "Sideways");
  REQUIRE_THROWS_NAMING(with(split({{"Regex", "(a"}}, "Isolated")), FormatError, "tok.json: pre_tokenizer.pattern.Regex",
                        "invalid regex", "missing closing parenthesis");
  REQUIRE_THROWS_NAMING(with(split({{"Text", " "}}, "Isolated")), FormatError, "tok.json: pre_tokenizer.pattern");
}

TEST_CASE("tokenizer pipeline: Digits, Whitespace, WhitespaceSplit, Sequence", "[tokenizer]") {
  json j = bpe({"a", "1", "2", "12", "a1", "b", ",", "a,"}, {{"a", "1"}, {"1", "2"}, {"a", ","}});
  auto with = [&](const json& p) {
    json k = j;
    k["pre_tokenizer"] = p;
    return make(k);
  };
  const Tokenizer plain = make(j);
  CHECK(plain.encode("a12") == ids(plain, {"a1", "2"}));  // a+1 has the lower rank
  CHECK(with({{"type", "Digits"}, {"individual_digits", false}}).encode("a12") == ids(plain, {"a", "12"}));
  CHECK(with({{"type", "Digits"}, {"individual_digits", true}}).encode("a12") == ids(plain, {"a", "1", "2"}));
  CHECK(plain.encode("a, b") == ids(plain, {"a,", "b"}));  // " " has no token and no <unk>: dropped, as HF
  CHECK(with({{"type", "Whitespace"}}).encode("a, b") == ids(plain, {"a", ",", "b"}));
  CHECK(with({{"type", "WhitespaceSplit"}}).encode("a,\t b") == ids(plain, {"a,", "b"}));
  const json seq = {{"type", "Sequence"}, {"pretokenizers", {{{"type", "WhitespaceSplit"}}, {{"type", "Digits"}, {"individual_digits", true}}}}};
  CHECK(with(seq).encode("a, a12") == ids(plain, {"a,", "a", "1", "2"}));
}

TEST_CASE("tokenizer pipeline: Metaspace pre-tokenizer", "[tokenizer]") {
  json j = bpe({M, "a", "b", M + "a", M + "b", "a" + M, "<x>"}, {{"a", M}, {M, "a"}, {M, "b"}});
  j["added_tokens"] = {{{"id", 6}, {"content", "<x>"}, {"special", false}}};
  auto with = [&](const std::string& scheme, bool split_words) {
    json k = j;
    k["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", M}, {"prepend_scheme", scheme}, {"split", split_words}};
    return make(k);
  };
  const Tokenizer plain = make(j);
  // "a b" -> "▁a▁b"; split: "▁a" "▁b"; whole: ▁ a ▁ b where a+▁ (rank 0) merges first.
  CHECK(with("always", true).encode("a b") == ids(plain, {M + "a", M + "b"}));
  CHECK(with("always", false).encode("a b") == ids(plain, {M, "a" + M, "b"}));
  CHECK(with("never", true).encode("a b") == ids(plain, {"a", M + "b"}));
  CHECK(with("always", true).encode("<x>a") == ids(plain, {"<x>", M + "a"}));
  // "first": only the part that starts the input gets the "▁".
  CHECK(with("first", true).encode("<x>a b") == ids(plain, {"<x>", "a", M + "b"}));
  CHECK(with("first", true).encode("a<x>b") == ids(plain, {M + "a", "<x>", "b"}));
  json legacy = j;
  legacy["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", M}, {"add_prefix_space", false}};
  CHECK(make(legacy).encode("a b") == ids(plain, {"a", M + "b"}));
}

TEST_CASE("tokenizer pipeline: ByteLevel pre-tokenizer and decoder", "[tokenizer]") {
  std::vector<std::string> pieces;
  for (int b = 0; b < 256; ++b) pieces.push_back(gpt2_char(b));  // id = byte
  const std::string G = gpt2_char(' ');                            // Ġ
  for (const std::string& p : {G + "a", G + "b", std::string("ab"), std::string("a1")}) pieces.push_back(p);
  json j = bpe(pieces, {{G, "a"}, {G, "b"}, {"a", "b"}, {"a", "1"}});
  j["decoder"] = {{"type", "ByteLevel"}};
  auto with = [&](bool prefix, bool regex) {
    json k = j;
    k["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", prefix}, {"use_regex", regex}};
    return make(k);
  };
  CHECK(with(false, true).encode("a b") == std::vector<int>{'a', 257});  // "a", " b" -> a, Ġb
  CHECK(with(true, true).encode("a b") == std::vector<int>{256, 257});   // " a", " b"
  CHECK(with(false, true).encode("ab b") == std::vector<int>{258, 257});
  CHECK(with(false, true).encode("a1") == std::vector<int>{'a', '1'});   // the regex parts letters from digits
  CHECK(with(false, false).encode("a1") == std::vector<int>{259});
  CHECK(with(false, true).encode("\xc3\xa9") == std::vector<int>{0xc3, 0xa9});  // é as its two bytes
  const Tokenizer t = with(false, true);
  CHECK(t.decode({256, 257, 0xc3, 0xa9}) == " a b\xc3\xa9");
  CHECK(t.decode({0xc3}) == "\xef\xbf\xbd");  // an incomplete character: U+FFFD
  CHECK(t.token_text(256) == " a");
  StreamDecoder s(t);
  CHECK(s.push(0xc3).empty());  // held: the next byte completes it
  CHECK(s.push(0xa9) == "\xc3\xa9");
  CHECK(s.push(256) == " a");
  CHECK(s.push(0xe2).empty());
  CHECK(s.flush() == "\xef\xbf\xbd");
}

TEST_CASE("tokenizer pipeline: BPE options", "[tokenizer]") {
  json j = bpe({"<unk>", "a", "b", "c", "ab", "abc"}, {{"a", "b"}});
  CHECK(make(j).encode("abc") == std::vector<int>{4, 3});
  CHECK(make(j).encode("xab") == std::vector<int>{4});  // no <unk>: the unknown character is dropped
  json ignore = j;
  ignore["model"]["ignore_merges"] = true;  // a pre-token that is a piece is that piece
  CHECK(make(ignore).encode("abc") == std::vector<int>{5});
  j["model"]["unk_token"] = "<unk>";
  CHECK(make(j).encode("xyab") == std::vector<int>{0, 0, 4});
  j["model"]["fuse_unk"] = true;
  CHECK(make(j).encode("xyab") == std::vector<int>{0, 4});
  j["model"]["merges"] = {"a b"};  // the string form
  CHECK(make(j).encode("ab") == std::vector<int>{4});
}

TEST_CASE("tokenizer pipeline: BPE merges as the definition says, on words of random merges", "[tokenizer]") {
  // The definition, naively: merge the lowest-rank adjacent pair, leftmost of equals, until none
  // applies. Random merges over "ab" make pairs of one rank overlap.
  std::mt19937 rng(7);
  std::vector<std::string> pieces = {"a", "b"};
  Merges merges;
  std::map<std::pair<std::string, std::string>, size_t> rank;
  while (merges.size() < 30) {
    const std::string l = pieces[rng() % pieces.size()], r = pieces[rng() % pieces.size()];
    if (rank.count({l, r}) || (l + r).size() > 8) continue;
    rank[{l, r}] = merges.size();
    merges.push_back({l, r});
    if (std::find(pieces.begin(), pieces.end(), l + r) == pieces.end()) pieces.push_back(l + r);
  }
  const Tokenizer t = make(bpe(pieces, merges));
  auto naive = [&](const std::string& word) {
    std::vector<std::string> symbols;
    for (char c : word) symbols.push_back(std::string(1, c));
    for (;;) {
      size_t best = symbols.size(), best_rank = 0;
      for (size_t i = 0; i + 1 < symbols.size(); ++i) {
        auto it = rank.find({symbols[i], symbols[i + 1]});
        if (it != rank.end() && (best == symbols.size() || it->second < best_rank)) best = i, best_rank = it->second;
      }
      if (best == symbols.size()) return symbols;
      symbols[best] += symbols[best + 1];
      symbols.erase(symbols.begin() + long(best) + 1);
    }
  };
  size_t wrong = 0;
  for (size_t n = 0; n < 1000; ++n) {
    std::string word;
    for (size_t i = 0, length = n < 999 ? 1 + rng() % 40 : 2000; i < length; ++i) word += "ab"[rng() % 2];
    std::vector<int> expected;
    for (const std::string& p : naive(word)) expected.push_back(*t.find(p));
    if (t.encode(word) != expected && wrong++ < 3) CHECK(t.encode(word) == expected);
  }
  CHECK(wrong == 0);
}

TEST_CASE("tokenizer pipeline: BPE's candidate queue pops lowest rank, then leftmost", "[tokenizer]") {
  std::mt19937 rng(11);
  tokenizer::CandidateQueue queue;
  for (int round = 0; round < 3; ++round) {  // cleared and reused, as per word
    queue.clear();
    std::multiset<std::pair<int, int>> expected;  // (rank, position)
    int pos = 0;
    for (int step = 0; step < 20000; ++step) {
      if (rng() % 3 != 0) {  // mostly left to right within a rank, sometimes back
        pos = rng() % 8 == 0 ? int(rng() % 1000) : pos + int(rng() % 3);
        const int rank = int(rng() % 6);
        queue.push(rank, pos);
        expected.insert({rank, pos});
      } else {
        int rank = -1, at = -1;
        REQUIRE(queue.pop(rank, at) == !expected.empty());
        if (expected.empty()) continue;
        REQUIRE(std::make_pair(rank, at) == *expected.begin());
        expected.erase(expected.begin());
      }
    }
  }
}

TEST_CASE("tokenizer pipeline: added tokens and their flags", "[tokenizer]") {
  json j = bpe({"a", "b", " ", "<", ">", "m", "s", "M"});
  auto with = [&](json flags, const json& normalizer = nullptr) {
    json k = j;
    flags["id"] = 8;
    flags["content"] = flags.value("content", "<m>");
    k["added_tokens"] = {flags, {{"id", 9}, {"content", "<s>"}, {"special", true}}, {{"id", 10}, {"content", "<m"}}};
    k["normalizer"] = normalizer;
    return make(k);
  };
  const Tokenizer t = with({{"special", false}});
  CHECK(t.encode("a<m>b") == std::vector<int>{0, 8, 1});
  CHECK(t.encode("a<m>b", false, false) == std::vector<int>{0, 8, 1});  // not special: always a token
  CHECK(t.encode("a<s>b") == std::vector<int>{0, 9, 1});
  CHECK(t.encode("a<s>b", false, false) == std::vector<int>{0, 3, 6, 4, 1});
  CHECK(t.encode("<m <m>") == std::vector<int>{10, 2, 8});  // the longest match at each place
  CHECK(t.is_special(9));
  CHECK(!t.is_special(8));
  CHECK(t.encode("a <m> b") == std::vector<int>{0, 2, 8, 2, 1});
  CHECK(with({{"lstrip", true}}).encode("a  <m> b") == std::vector<int>{0, 8, 2, 1});
  CHECK(with({{"rstrip", true}}).encode("a <m>  b") == std::vector<int>{0, 2, 8, 1});
  // Inside a word the match is dropped, and its text is not searched again (HF's matcher).
  CHECK(with({{"single_word", true}}).encode("a<m>b") == std::vector<int>{0, 3, 5, 4, 1});
  CHECK(with({{"single_word", true}}).encode(" <m> ") == std::vector<int>{2, 8, 2});
  // normalized: matched in the normalized text, as the normalizer writes the token.
  const json lower = {{"type", "Lowercase"}};
  CHECK(with({{"content", "<M>"}, {"normalized", true}}, lower).encode("a<M>") == std::vector<int>{0, 8});
  CHECK(with({{"content", "<M>"}, {"normalized", false}}, lower).encode("a<M>") == std::vector<int>{0, 8});
  CHECK(with({{"content", "<M>"}, {"normalized", false}}, lower).encode("a<m>") == std::vector<int>{0, 10, 4});
}

TEST_CASE("tokenizer pipeline: post-processors and tokenizer_config.json", "[tokenizer]") {
  json j = bpe({"<s>", "</s>", "a", "[CLS]", "[SEP]"});
  j["added_tokens"] = {{{"id", 0}, {"content", "<s>"}, {"special", true}}, {{"id", 1}, {"content", "</s>"}, {"special", true}}};
  const json templ = {{"type", "TemplateProcessing"},
                      {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                  {{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}}}},
                      {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {0}}}}, {"</s>", {{"id", "</s>"}, {"ids", {1}}}}}}};
  auto with = [&](const json& p) {
    json k = j;
    k["post_processor"] = p;
    return make(k);
  };
  CHECK(with(templ).encode("a", true) == std::vector<int>{0, 2, 1});
  CHECK(with(templ).encode("a") == std::vector<int>{2});
  CHECK(with(templ).prefix_special() == std::vector<int>{0});
  CHECK(with(templ).suffix_special() == std::vector<int>{1});
  CHECK(with({{"type", "BertProcessing"}, {"sep", {"[SEP]", 4}}, {"cls", {"[CLS]", 3}}}).encode("a", true) == std::vector<int>{3, 2, 4});
  CHECK(with({{"type", "RobertaProcessing"}, {"sep", {"</s>", 1}}, {"cls", {"<s>", 0}}}).encode("a", true) == std::vector<int>{0, 2, 1});
  CHECK(with({{"type", "Sequence"}, {"processors", {{{"type", "ByteLevel"}}, templ}}}).encode("a", true) == std::vector<int>{0, 2, 1});
  CHECK(with({{"type", "ByteLevel"}}).encode("a", true) == std::vector<int>{2});
  json bad = templ;
  bad["single"][0]["SpecialToken"]["id"] = "<bos>";
  REQUIRE_THROWS_NAMING(with(bad), FormatError, "tok.json: post_processor.single[0]", "'<bos>'");
  bad = templ;
  bad["special_tokens"]["<s>"]["ids"] = {99};
  REQUIRE_THROWS_NAMING(with(bad), FormatError, "tok.json: post_processor.special_tokens.<s>", "99");

  // No post-processor: tokenizer_config.json beside it says what add_special adds.
  TempDir tmp;
  write_file(tmp / "tokenizer.json", j.dump());
  CHECK(Tokenizer::load_dir(tmp.path).encode("a", true) == std::vector<int>{2});
  write_file(tmp / "tokenizer_config.json",
             json{{"add_bos_token", true}, {"bos_token", {{"content", "<s>"}}}, {"add_eos_token", true}, {"eos_token", "</s>"}}.dump());
  CHECK(Tokenizer::load_dir(tmp.path).encode("a", true) == std::vector<int>{0, 2, 1});
  write_file(tmp / "tokenizer_config.json", json{{"add_bos_token", true}, {"bos_token", "<bos>"}}.dump());
  REQUIRE_THROWS_NAMING(Tokenizer::load_dir(tmp.path), FormatError, (tmp / "tokenizer_config.json").string(), "bos_token '<bos>'");
}

TEST_CASE("tokenizer pipeline: decoders, and streaming equals decode", "[tokenizer]") {
  json j = bpe({M + "a", M + "b", "<0xC3>", "<0xA9>", "x", " a", "<s>"});
  j["added_tokens"] = {{{"id", 6}, {"content", "<s>"}, {"special", true}}};
  auto with = [&](const json& d) {
    json k = j;
    k["decoder"] = d;
    return make(k);
  };
  const json replace_meta = {{"type", "Replace"}, {"pattern", {{"String", M}}}, {"content", " "}};
  auto seq = [](std::initializer_list<json> steps) { return json{{"type", "Sequence"}, {"decoders", json(steps)}}; };
  const json fuse = {{"type", "Fuse"}}, fallback = {{"type", "ByteFallback"}};
  const json strip_front = {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}};
  CHECK(with({{"type", "Metaspace"}, {"replacement", M}, {"prepend_scheme", "always"}}).decode({0, 1}) == "a b");
  CHECK(with({{"type", "Metaspace"}, {"replacement", M}, {"prepend_scheme", "never"}}).decode({0, 1}) == " a b");
  CHECK(with(seq({fallback, fuse})).decode({2, 3, 4}) == "\xc3\xa9x");
  CHECK(with(seq({fallback, fuse})).decode({2, 4}) == "\xef\xbf\xbdx");
  CHECK(with(seq({fallback, fuse})).decode({3, 2}) == "\xef\xbf\xbd\xef\xbf\xbd");  // an invalid run: U+FFFD per byte
  CHECK(with({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 1}}).decode({5, 5}) == "aa");  // per token
  CHECK(with(seq({fuse, strip_front})).decode({5, 5}) == "a a");  // after Fuse: the text's start only
  CHECK(with(seq({replace_meta, fallback, fuse, strip_front})).decode({6, 0, 1}) == "a b");
  CHECK(with(seq({{{"type", "Replace"}, {"pattern", {{"Regex", "[ab]"}}}, {"content", "z"}}, fuse})).decode({0, 1}) == M + "z" + M + "z");
  CHECK(make(j).decode({4, 4, 6, 0}) == "x x " + M + "a");  // no decoder: HF joins the tokens with spaces
  CHECK(with(seq({replace_meta, fuse})).token_text(6) == "<s>");

  // Streaming gives decode()'s text for every chain, whatever the ids.
  const std::vector<json> decoders = {
      nullptr, seq({replace_meta, fallback, fuse, strip_front}), {{"type", "Metaspace"}, {"replacement", M}},
      seq({fallback, fuse, {{"type", "Strip"}, {"content", "x"}, {"start", 0}, {"stop", 2}}}),
      seq({fuse, {{"type", "Replace"}, {"pattern", {{"String", "xx"}}}, {"content", "y"}}}), seq({fuse, {{"type", "Metaspace"}}})};
  const std::vector<std::vector<int>> streams = {{0, 1, 2, 3, 4}, {6, 2, 3, 2, 0, 3}, {4, 4, 4, 5}, {5, 2}, {6, 6, 4, 0, 2, 3, 3}};
  for (const json& d : decoders)
    for (const std::vector<int>& stream : streams) {
      INFO(d.dump() << " on " << json(stream).dump());
      const Tokenizer t = with(d);
      StreamDecoder s(t);
      std::string text;
      for (int id : stream) text += s.push(id);
      text += s.flush();
      CHECK(text == t.decode(stream));
      const std::string context = t.decode({stream[0]});
      if (t.decode(stream).compare(0, context.size(), context) != 0) continue;  // (Replace "xx": no "rest" to give)
      StreamDecoder primed(t);  // what follows a context is the rest of the whole text
      primed.prime({stream[0]});
      std::string rest;
      for (size_t i = 1; i < stream.size(); ++i) rest += primed.push(stream[i]);
      rest += primed.flush();
      CHECK(context + rest == t.decode(stream));
    }
}

TEST_CASE("tokenizer pipeline: a regex that backtracks without end stops with an error naming the file", "[tokenizer]") {
  json j = bpe({"a", "b"});
  j["pre_tokenizer"] = split({{"Regex", "(a+)+$"}}, "Isolated");
  const Tokenizer t = make(j);
  CHECK(t.encode("aaab") == std::vector<int>{0, 0, 0, 1});
  REQUIRE_THROWS_NAMING(t.encode(std::string(5000, 'a') + "b"), Error, "tok.json: pre_tokenizer.pattern.Regex", "gave up");
}

TEST_CASE("tokenizer pipeline: a regex may scan the whole of a long text, once per match", "[tokenizer]") {
  // Qwen's \s*[\r\n]+ backtracks over a whole run of spaces before \s+(?!\S) takes it: 16 MB of
  // spaces is more steps than PCRE2's default limit, but linear, so it is no runaway.
  json j = bpe({"a", " "});
  j["pre_tokenizer"] = split({{"Regex", "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}}, "Removed");
  CHECK(make(j).encode(std::string(16'000'000, ' ') + "a") == std::vector<int>{0});
}

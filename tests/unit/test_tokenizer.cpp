// The tokenizer on a small hand-made tokenizer.json: BPE by rank, byte fallback, decoding,
// streaming, and clear errors for files it cannot read. (Agreement with SentencePiece on real
// text is tests/reference/tokenizer_test.py.)
#include "pert/error.hpp"
#include "pert/tokenizer.hpp"
#include "test_util.hpp"

using namespace pert;

namespace {


json tiny_tokenizer() {
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    vocab[name] = 3 + b;
  }
  int id = 259;
  for (const std::string& p : {M, std::string("a"), std::string("b"), std::string("c"), M + "a", std::string("bc"),
                               M + "ab", M + "abc", M + M})
    vocab[p] = id++;
  return {{"version", "1.0"},
          {"added_tokens",
           {{{"id", 0}, {"content", "<unk>"}, {"special", true}},
            {{"id", 1}, {"content", "<s>"}, {"special", true}},
            {{"id", 2}, {"content", "</s>"}, {"special", true}}}},
          {"normalizer",
           {{"type", "Sequence"},
            {"normalizers",
             {{{"type", "Prepend"}, {"prepend", M}},
              {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", M}}}}}},
          {"pre_tokenizer", nullptr},
          {"decoder",
           {{"type", "Sequence"},
            {"decoders",
             {{{"type", "Replace"}, {"pattern", {{"String", M}}}, {"content", " "}},
              {{"type", "ByteFallback"}},
              {{"type", "Fuse"}},
              {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
          {"model",
           {{"type", "BPE"},
            {"vocab", vocab},
            {"merges", {M + " a", "b c", M + "a b", M + "ab c", M + " " + M}},
            {"byte_fallback", true},
            {"fuse_unk", true},
            {"unk_token", "<unk>"}}}};
}

Tokenizer load(const TempDir& tmp, const json& j) {
  write_file(tmp / "tokenizer.json", j.dump());
  return Tokenizer::load(tmp / "tokenizer.json");
}

}  // namespace

TEST_CASE("tokenizer: BPE by merge rank, byte fallback, decoding", "[tokenizer]") {
  TempDir tmp;
  const Tokenizer t = load(tmp, tiny_tokenizer());
  const int meta = 259, b = 261, c = 262, ma = 263, bc = 264, mab = 265;
  REQUIRE(t.vocab_size() == 268);
  CHECK(t.encode("") == std::vector<int>{});
  // "▁abc": ▁+a (rank 0) then b+c (rank 1) then ▁a+bc has no merge; ▁ab never forms.
  CHECK(t.encode("abc") == std::vector<int>{ma, bc});
  CHECK(t.encode("ab") == std::vector<int>{mab});
  // "▁a▁▁a": both "▁ a" (rank 0) merge before "▁ ▁" (rank 4), which is then gone.
  CHECK(t.encode("a  a") == std::vector<int>{ma, meta, ma});
  CHECK(t.encode("  ") == std::vector<int>{267, meta});  // "▁▁▁": leftmost pair first
  CHECK(t.encode("c") == std::vector<int>{meta, c});
  // "é" is not in the vocabulary: its two UTF-8 bytes become <0xC3> <0xA9>.
  CHECK(t.encode("\xc3\xa9") == std::vector<int>{meta, 3 + 0xc3, 3 + 0xa9});
  for (const std::string s : {"abc", " ab", "a  b c", "\xc3\xa9t\xc3\xa9", "", "cab"})
    CHECK(t.decode(t.encode(s)) == s);
  CHECK(t.decode({1, ma, b, 2}) == "ab");  // special tokens decode to nothing
  // Special tokens in the text are parsed (HF) unless asked not to (SentencePiece); the text
  // after one is normalized on its own, so it gets its own "▁".
  CHECK(t.encode("a<s>c") == std::vector<int>{ma, 1, meta, c});
  CHECK(t.encode("<s>", false, false) == std::vector<int>{meta, 3 + '<', 3 + 's', 3 + '>'});
  CHECK(t.encode("ab", true) == std::vector<int>{mab});  // no post-processor: nothing added
  REQUIRE_THROWS_NAMING(t.encode("a\xff"), Error, "not valid UTF-8", "byte 1");
  REQUIRE_THROWS_NAMING(t.token_text(268), Error, "token id 268");
}

TEST_CASE("tokenizer: streaming holds a split UTF-8 character back", "[tokenizer]") {
  TempDir tmp;
  const Tokenizer t = load(tmp, tiny_tokenizer());
  StreamDecoder s(t);
  CHECK(s.push(1).empty());           // <s>
  CHECK(s.push(263) == "a");          // "▁a": the prepended space is stripped at the start
  CHECK(s.push(3 + 0xe2).empty());    // "€" (E2 82 AC) as bytes: a run of byte tokens is
  CHECK(s.push(3 + 0x82).empty());    // decided when it ends (HF decodes an invalid run as
  CHECK(s.push(3 + 0xac).empty());    // one U+FFFD per byte)
  CHECK(s.push(259) == "\xe2\x82\xac ");
  CHECK(s.push(3 + 0xc3).empty());
  CHECK(s.flush() == "\xef\xbf\xbd");  // an incomplete character at the end: U+FFFD, as decode()
  CHECK(t.decode({1, 263, 3 + 0xe2, 3 + 0x82, 3 + 0xac, 259, 3 + 0xc3}) == "a\xe2\x82\xac \xef\xbf\xbd");
}

TEST_CASE("tokenizer: valid_utf8 finds the first bad byte wherever it is", "[tokenizer]") {
  // ASCII is checked eight bytes at a time: a bad byte at every offset of a block and in the
  // tail after the last whole block, and characters that straddle a block's edge.
  for (size_t at = 0; at < 20; ++at) {
    for (const std::string bad : {"\xff", "\xc0\x80", "\xed\xa0\x80", "\xe2\x82"}) {
      std::string s(at, 'a');
      s += bad;
      s += std::string(9, 'b');
      size_t where = 99;
      CHECK_FALSE(valid_utf8(s, &where));
      CHECK(where == at);
    }
    const std::string good = std::string(at, 'a') + "\xe2\x82\xac" + std::string(at, 'b') + "\xf0\x9f\x98\x80";
    CHECK(valid_utf8(good));
  }
  CHECK(valid_utf8(""));
}

TEST_CASE("tokenizer: files it cannot read are refused with the file named", "[tokenizer]") {
  TempDir tmp;
  const std::string path = (tmp / "tokenizer.json").string();
  json j = tiny_tokenizer();
  SECTION("not JSON") {
    write_file(tmp / "tokenizer.json", "{\"model\": ");
    REQUIRE_THROWS_NAMING(Tokenizer::load(tmp / "tokenizer.json"), FormatError, path, "invalid JSON");
  }
  SECTION("not BPE") {
    j["model"]["type"] = "Unigram";
    REQUIRE_THROWS_NAMING(load(tmp, j), FormatError, path, "'Unigram' is not supported");
  }
  SECTION("a merge of unknown pieces") {
    j["model"]["merges"].push_back("x y");
    REQUIRE_THROWS_NAMING(load(tmp, j), FormatError, path, "merge \"x y\"", "not in the vocabulary");
  }
  SECTION("ids spread far past the tokens") {
    j["model"]["vocab"]["bc"] = 100000;
    REQUIRE_THROWS_NAMING(load(tmp, j), FormatError, path, "no token with id 264");
  }
  SECTION("a few unused ids are allowed, and decode to nothing as in HF") {
    j["model"]["vocab"]["bc"] = 270;
    const Tokenizer t = load(tmp, j);
    CHECK(t.vocab_size() == 271);
    CHECK(t.decode({263, 264, 263}) == "a a");
  }
  SECTION("an unknown normalizer") {
    j["normalizer"]["normalizers"][1] = {{"type", "BertNormalizer"}};
    REQUIRE_THROWS_NAMING(load(tmp, j), FormatError, path, "normalizer.normalizers[1].type 'BertNormalizer' is not supported");
  }
  SECTION("a Metaspace pre-tokenizer stands for the normalizer") {
    j["normalizer"] = nullptr;
    j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", M}, {"prepend_scheme", "first"}, {"split", false}};
    CHECK(load(tmp, j).encode("ab") == std::vector<int>{265});
  }
  SECTION("a field of the wrong type") {
    j["model"]["byte_fallback"] = "true";
    REQUIRE_THROWS_NAMING(load(tmp, j), FormatError, path, "boolean");
  }
  SECTION("an added token that takes a vocabulary id") {
    j["added_tokens"].push_back({{"id", 260}, {"content", "<pad>"}, {"special", true}});
    REQUIRE_THROWS_NAMING(load(tmp, j), FormatError, path, "'<pad>' reuses id 260 of 'a'");
  }
  SECTION("features pert does not implement") {
    j["model"]["continuing_subword_prefix"] = "##";
    REQUIRE_THROWS_NAMING(load(tmp, j), FormatError, path, "model.continuing_subword_prefix", "not supported");
    j = tiny_tokenizer();
    j["model"]["dropout"] = 0.1;
    REQUIRE_THROWS_NAMING(load(tmp, j), FormatError, path, "model.dropout");
    j = tiny_tokenizer();
    j["truncation"] = {{"max_length", 512}};
    REQUIRE_THROWS_NAMING(load(tmp, j), FormatError, path, "truncation is not supported");
    j = tiny_tokenizer();
    j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {{{"type", "Digits"}}, {{"type", "BertPreTokenizer"}}}}};
    REQUIRE_THROWS_NAMING(load(tmp, j), FormatError, path, "pre_tokenizer.pretokenizers[1].type 'BertPreTokenizer' is not supported");
    j = tiny_tokenizer();
    j["decoder"] = {{"type", "WordPiece"}};
    REQUIRE_THROWS_NAMING(load(tmp, j), FormatError, path, "decoder.type 'WordPiece' is not supported");
    j = tiny_tokenizer();
    j["post_processor"] = {{"type", "PairOnly"}};
    REQUIRE_THROWS_NAMING(load(tmp, j), FormatError, path, "post_processor.type 'PairOnly' is not supported");
  }
  SECTION("an invalid regex: the key and PCRE2's message") {
    j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(a"}}}, {"behavior", "Isolated"}};
    REQUIRE_THROWS_NAMING(load(tmp, j), FormatError, path, "pre_tokenizer.pattern.Regex", "invalid regex", "missing closing parenthesis");
  }
  SECTION("missing file") {
    REQUIRE_THROWS_NAMING(Tokenizer::load(tmp / "none.json"), IoError, "none.json");
  }
}

// A GGUF file's tokenizer metadata as tokenizer.json (src/tokenizer/gguf_vocab.cpp): the merges
// SentencePiece scores give, the pre-tokenizer a tokenizer.ggml.pre names, llama.cpp's defaults,
// and refusals naming the key. (tests/reference/gguf_tokenizer_test.py compares real vocabularies.)
#include <cmath>
#include <cstring>
#include <functional>

#include "pert/error.hpp"
#include "pert/gguf.hpp"
#include "pert/tokenizer.hpp"
#include "test_util.hpp"
#include "tokenizer/internal.hpp"

namespace {

// A small GGUF writer (version 3, no tensors), independent of the reader under test.
struct GgufWriter {
  std::string kv;
  int count = 0;
  template <class T>
  void raw(T v) { kv.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void str(const std::string& s) { raw(uint64_t(s.size())), kv += s; }
  void key(const std::string& k, uint32_t type) { str(k), raw(type), ++count; }
  void string(const std::string& k, const std::string& v) { key(k, 8), str(v); }
  void u32(const std::string& k, uint32_t v) { key(k, 4), raw(v); }
  void boolean(const std::string& k, bool v) { key(k, 7), raw(uint8_t(v)); }
  void strings(const std::string& k, const std::vector<std::string>& v) {
    key(k, 9), raw(uint32_t(8)), raw(uint64_t(v.size()));
    for (const std::string& s : v) str(s);
  }
  void floats(const std::string& k, const std::vector<float>& v) {
    key(k, 9), raw(uint32_t(6)), raw(uint64_t(v.size()));
    for (float x : v) raw(x);
  }
  void ints(const std::string& k, const std::vector<int32_t>& v) {
    key(k, 9), raw(uint32_t(5)), raw(uint64_t(v.size()));
    for (int32_t x : v) raw(x);
  }
  fs::path write(const TempDir& dir, const std::string& name) const {
    std::string head = "GGUF";
    auto put = [&](auto v) { head.append(reinterpret_cast<const char*>(&v), sizeof v); };
    put(uint32_t(3)), put(uint64_t(0)), put(uint64_t(count));
    const fs::path path = dir / name;
    write_file(path, head + kv);
    return path;
  }
};

std::string error_of(const fs::path& path) {
  try {
    pert::GgufFile f(path);
    pert::Tokenizer::from_gguf(f);
  } catch (const pert::FormatError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("gguf tokenizer: SentencePiece merges ordered by the merged piece's score", "[tokenizer][gguf]") {
  TempDir dir;
  GgufWriter w;
  w.string("tokenizer.ggml.model", "llama");
  // <unk> <s> </s> <0x41>, then normal pieces; "ab" outranks "bc", "abc" splits two ways,
  // "<s>x"-like pieces of control parts never merge
  w.strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "<0x41>", "\xe2\x96\x81", "a", "b", "c", "bc", "ab", "abc", "\xe2\x96\x81" "a"});
  w.floats("tokenizer.ggml.scores", {0, 0, 0, 0, -100, -101, -102, -103, -2, -1, -3, -4});
  w.ints("tokenizer.ggml.token_type", {2, 3, 3, 6, 1, 1, 1, 1, 1, 1, 1, 1});
  const fs::path path = w.write(dir, "spm.gguf");
  pert::GgufFile f(path);
  const json j = pert::tokenizer::tokenizer_json_from_gguf(f);
  // by score: ab (-1), bc (-2), abc (-3: the longer left part first), ▁a (-4)
  CHECK(j["model"]["merges"] == json::parse(R"([["a","b"],["b","c"],["ab","c"],["a","bc"],["\u2581","a"]])"));
  CHECK(j["model"]["byte_fallback"] == true);
  CHECK(j["model"]["unk_token"] == "<unk>");
  CHECK(j["added_tokens"].size() == 3);
  CHECK(j["normalizer"]["type"] == "Sequence");  // add_space_prefix: llama.cpp's default for llama
  const pert::Tokenizer tok = pert::Tokenizer::from_gguf(f);
  CHECK(tok.prefix_special() == std::vector<int>{1});  // add_bos: the default
  CHECK(tok.suffix_special().empty());
  CHECK(tok.encode("abc") == std::vector<int>{4, 10});   // ▁ + abc (ab first, then ab+c)
  CHECK(tok.encode("bc a") == std::vector<int>{4, 8, 11});
  CHECK(tok.encode("<s>", false, true) == std::vector<int>{1});  // no text around it: no "▁" either (llama.cpp)
  CHECK(tok.encode("<s>", false, false) == std::vector<int>{4, 0});  // as text: "<", "s", ">" are no pieces: one fused <unk>
  CHECK(tok.decode(tok.encode("abc bc")) == "abc bc");
}

TEST_CASE("gguf tokenizer: gpt2 models, pre-tokenizer names and llama.cpp's defaults", "[tokenizer][gguf]") {
  TempDir dir;
  auto make = [&](const std::string& pre, const std::string& name) {
    GgufWriter w;
    w.string("tokenizer.ggml.model", "gpt2");
    if (!pre.empty()) w.string("tokenizer.ggml.pre", pre);
    w.strings("tokenizer.ggml.tokens", {"a", "b", "ab", "\xc4\xa0", "\xc4\xa0" "ab", "1", "2", "12", "<|bos|>"});
    w.ints("tokenizer.ggml.token_type", {1, 1, 1, 1, 1, 1, 1, 1, 3});
    w.strings("tokenizer.ggml.merges", {"a b", "\xc4\xa0 ab", "1 2"});
    w.u32("tokenizer.ggml.bos_token_id", 8);
    return w.write(dir, name);
  };
  {
    pert::GgufFile f(make("llama-bpe", "llama3.gguf"));
    const json j = pert::tokenizer::tokenizer_json_from_gguf(f);
    CHECK(j["model"]["ignore_merges"] == true);
    CHECK(j["pre_tokenizer"]["pretokenizers"][0]["type"] == "Split");
    const pert::Tokenizer tok = pert::Tokenizer::from_gguf(f);
    CHECK(tok.prefix_special() == std::vector<int>{8});  // llama.cpp adds BOS for the Llama 3 family
    CHECK(tok.encode("ab ab 12") == std::vector<int>{2, 4, 3, 7});  // (digits: runs of 3 stay whole)
    CHECK(tok.decode({2, 4}) == "ab ab");
  }
  {
    pert::GgufFile f(make("qwen2", "qwen2.gguf"));
    const pert::Tokenizer tok = pert::Tokenizer::from_gguf(f);
    CHECK(tok.prefix_special().empty());
    CHECK(tok.encode("12") == std::vector<int>{5, 6});  // one digit at a time
  }
  {
    pert::GgufFile f(make("", "nopre.gguf"));  // missing: llama.cpp's "default" regexes
    CHECK(pert::tokenizer::tokenizer_json_from_gguf(f)["pre_tokenizer"]["pretokenizers"].size() == 5);
    CHECK(pert::Tokenizer::from_gguf(f).encode("<|bos|>ab", false, true) == std::vector<int>{8, 2});
  }
  {
    const fs::path path = make("no-such", "bad.gguf");
    const std::string e = error_of(path);
    CHECK(e.find(path.string() + ": key 'tokenizer.ggml.pre' 'no-such' is not a pre-tokenizer") == 0);
    CHECK(e.find('\n') == std::string::npos);
  }
}

TEST_CASE("gguf tokenizer: refusals name the file and the key", "[tokenizer][gguf]") {
  TempDir dir;
  struct Case {
    const char* name;
    std::function<void(GgufWriter&)> add;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {"scores", [](GgufWriter& w) { w.floats("tokenizer.ggml.scores", {0}); },
       "key 'tokenizer.ggml.scores' has 1 entries, but tokenizer.ggml.tokens has 3"},
      {"types", [](GgufWriter& w) { w.ints("tokenizer.ggml.token_type", {1, 0, 1}); },
       "key 'tokenizer.ggml.token_type' entry 1 ('b') is 0, not a token type"},
      {"nan", [](GgufWriter& w) { w.floats("tokenizer.ggml.scores", {0, NAN, 0}); }, "key 'tokenizer.ggml.scores' entry 1 is NaN"},
  };
  for (const Case& c : cases) {
    GgufWriter w;
    w.string("tokenizer.ggml.model", "llama");
    w.strings("tokenizer.ggml.tokens", {"a", "b", "ab"});
    w.boolean("tokenizer.ggml.add_bos_token", false);
    c.add(w);
    const fs::path path = w.write(dir, std::string(c.name) + ".gguf");
    INFO(c.name);
    CHECK(error_of(path) == path.string() + ": " + c.expect + (std::string(c.name) == "types" ? " (1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte)" : ""));
  }
}

TEST_CASE("gguf tokenizer: a vocabulary past 2^21 tokens is refused before it is built", "[tokenizer][gguf][catalogue]") {
  TempDir dir;
  GgufWriter w;
  w.string("tokenizer.ggml.model", "llama");
  w.key("tokenizer.ggml.tokens", 9), w.raw(uint32_t(8)), w.raw(uint64_t((1 << 21) + 1));
  for (int i = 0; i <= (1 << 21); ++i) w.str("");  // empty pieces: 8 bytes each in the file
  const fs::path path = w.write(dir, "many.gguf");
  CHECK(error_of(path) == path.string() + ": key 'tokenizer.ggml.tokens' has 2097153 tokens, more than pert's 2097152");
}

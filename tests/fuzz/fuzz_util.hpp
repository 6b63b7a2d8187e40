// Helpers shared by the libFuzzer harnesses (and their replay driver builds).
//
// The library promises that every failure on bad input is a pert::Error. The harnesses catch
// exactly that; anything else escaping (std::out_of_range, nlohmann::json::exception, ...) is
// reported by fail() and aborts, so libFuzzer records it as a crash.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "pert/error.hpp"
#include "pert/tokenizer.hpp"

namespace fuzz {

inline std::string_view bytes(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "FUZZ FINDING: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

inline void check(bool ok, const std::string& what) {
  if (!ok) fail(what);
}

// Runs `body`; a pert::Error is an accepted outcome, any other exception is a finding.
template <class Body>
void expect_pert_errors(const char* what, Body&& body) {
  try {
    body();
  } catch (const pert::Error&) {
  } catch (const std::exception& e) {
    fail(std::string(what) + ": non-pert exception escaped: " + e.what());
  }
}

// Decoding properties that hold for every tokenizer: decode() of in-range ids succeeds, the
// StreamDecoder emits the same text piece by piece, and ids outside the vocabulary are
// pert::Errors, never reads.
inline void check_decoders(const pert::Tokenizer& tok, const std::vector<int>& ids) {
  std::string whole;
  expect_pert_errors("decode", [&] { whole = tok.decode(ids); });
  pert::StreamDecoder stream(tok);
  std::string streamed;
  for (int id : ids) streamed += stream.push(id);
  streamed += stream.flush();
  check(streamed == whole, "StreamDecoder text differs from decode()");
  for (int bad : {-1, tok.vocab_size(), tok.vocab_size() + 1000, int(0x80000000u)}) {
    bool threw = false;
    try {
      tok.decode({bad});
    } catch (const pert::Error&) {
      threw = true;
    }
    check(threw, "decode of out-of-range id " + std::to_string(bad) + " did not throw pert::Error");
  }
}

// encode() throws pert::Error when the text is not UTF-8 (or a regex gives up on it). Returns
// whether it encoded.
inline bool try_encode(const pert::Tokenizer& tok, std::string_view text, std::vector<int>& ids, bool parse_special = true,
                       bool add_special = false) {
  try {
    ids = tok.encode(text, add_special, parse_special);
  } catch (const pert::Error&) {
    return false;
  } catch (const std::exception& e) {
    fail(std::string("encode: non-pert exception escaped: ") + e.what());
  }
  for (int id : ids) check(id >= 0 && id < tok.vocab_size(), "encode produced id " + std::to_string(id) + " outside the vocabulary");
  return true;
}

// A byte-level BPE tokenizer.json as Llama 3's pipeline has it: a Split regex, then ByteLevel
// without its own regex; every byte is a token, a few merges, two added tokens.
inline std::string byte_level_tokenizer() {
  nlohmann::json vocab = nlohmann::json::object();
  int id = 0, extra = 0;
  for (int b = 0; b < 256; ++b) {  // GPT-2's alphabet: printable bytes as themselves, the rest from U+0100
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    const unsigned cp = printable ? unsigned(b) : 256u + unsigned(extra++);
    std::string c;
    if (cp < 0x80) c += char(cp);
    else c += char(0xc0 | (cp >> 6)), c += char(0x80 | (cp & 0x3f));
    vocab[c] = id++;
  }
  for (const char* p : {"\xc4\xa0t", "he", "\xc4\xa0the", "in", "\xc4\xa0" "a"}) vocab[p] = id++;
  const nlohmann::json j = {
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"ignore_merges", true},
                 {"merges", {"\xc4\xa0 t", "h e", "\xc4\xa0t he", "i n", "\xc4\xa0 a"}}}},
      {"added_tokens", {{{"id", id}, {"content", "<|begin|>"}, {"special", true}},
                        {{"id", id + 1}, {"content", "<|end|>"}, {"special", true}}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern", {{"Regex", "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}}},
           {"behavior", "Isolated"}, {"invert", false}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}},
      {"post_processor", {{"type", "TemplateProcessing"},
                          {"single", {{{"SpecialToken", {{"id", "<|begin|>"}}}}, {{"Sequence", {{"id", "A"}}}}}},
                          {"special_tokens", {{"<|begin|>", {{"id", "<|begin|>"}, {"ids", {id}}}}}}}},
      {"decoder", {{"type", "ByteLevel"}}}};
  return j.dump();
}

}  // namespace fuzz

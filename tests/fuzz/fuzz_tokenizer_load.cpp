// Fuzzes the tokenizer.json loader (pert::Tokenizer::parse, what Tokenizer::load runs on a
// file's text): malformed JSON, wrong field types, bad ids, merges, regexes and pipeline parts
// must give a pert::Error. A tokenizer that loads must then encode a few fixed strings and decode ids
// consistently (fuzz_util.hpp).
#include <algorithm>
#include <cstdint>
#include <string>

#include "fuzz_util.hpp"
#include "pert/tokenizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::expect_pert_errors("Tokenizer::parse", [&] {
    const pert::Tokenizer tok = pert::Tokenizer::parse(fuzz::bytes(data, size), "fuzz/tokenizer.json");
    fuzz::check(tok.vocab_size() > 0, "loaded a tokenizer with an empty vocabulary");
    for (const char* text : {"", " ", "Hello world", "  two  spaces ", "\xe2\x96\x81meta", "caf\xc3\xa9 \xf0\x9f\x98\x80",
                           "<s>x</s> <|begin|>the 123 in<|end|> a", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab"}) {
      std::vector<int> ids;
      if (fuzz::try_encode(tok, text, ids)) fuzz::check_decoders(tok, ids);
      if (fuzz::try_encode(tok, text, ids, false, true)) fuzz::check_decoders(tok, ids);
    }
    std::vector<int> all;
    for (int id = 0; id < std::min(tok.vocab_size(), 300); ++id) all.push_back(id);
    fuzz::check_decoders(tok, all);
  });
  return 0;
}

// Fuzzes the tokenizer.json loader (pert::Tokenizer::load): malformed JSON, wrong field
// types, bad ids, merges and normalizers must give a pert::Error. A tokenizer that loads must
// then encode a few fixed strings and decode ids consistently (fuzz_util.hpp). Load() reads a
// file, so each input is written to one scratch file per process (Tokenizer::from_json is
// private).
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "fuzz_util.hpp"
#include "pert/tokenizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("pert_fuzz_tokenizer_" + std::to_string(::getpid()) + ".json");
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
    if (!out) fuzz::fail("cannot write " + path.string());
  }
  fuzz::expect_pert_errors("Tokenizer::load", [&] {
    const pert::Tokenizer tok = pert::Tokenizer::load(path);
    fuzz::check(tok.vocab_size() > 0, "loaded a tokenizer with an empty vocabulary");
    for (const char* text : {"", " ", "Hello world", "  two  spaces ", "\xe2\x96\x81meta", "caf\xc3\xa9 \xf0\x9f\x98\x80"}) {
      std::vector<int> ids;
      if (fuzz::try_encode(tok, text, ids)) fuzz::check_decoders(tok, ids);
    }
    std::vector<int> all;
    for (int id = 0; id < std::min(tok.vocab_size(), 300); ++id) all.push_back(id);
    fuzz::check_decoders(tok, all);
  });
  std::error_code ec;
  std::filesystem::remove(path, ec);
  return 0;
}

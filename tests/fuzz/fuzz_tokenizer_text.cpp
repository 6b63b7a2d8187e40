// Fuzzes tokenizer encode/decode on arbitrary bytes with the real llama-style tokenizer of
// models/rope and a byte-level one with a Split regex: encode() must throw pert::Error exactly
// when the bytes are not UTF-8 and otherwise round-trip through decode() (byte fallback /
// byte-level covers every character); ids made of the bytes (in range) must decode, and the
// StreamDecoder must agree with decode().
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_util.hpp"
#include "pert/tokenizer.hpp"

#ifndef PERT_SOURCE_DIR
#error "PERT_SOURCE_DIR must name the repository root"
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const pert::Tokenizer tok = pert::Tokenizer::load(PERT_SOURCE_DIR "/models/rope/tokenizer.json");
  const std::string_view text = fuzz::bytes(data, size);

  // Special tokens as text (SentencePiece's reading): everything comes back.
  std::vector<int> ids;
  const bool encoded = fuzz::try_encode(tok, text, ids, false);
  fuzz::check(encoded == pert::valid_utf8(text), "encode() and valid_utf8() disagree");
  // decode() maps "▁" to a space, so only text without a literal "▁" comes back as it was.
  if (encoded && text.find("\xe2\x96\x81") == std::string_view::npos)
    fuzz::check(tok.decode(ids) == text, "decode(encode(text)) != text");
  if (encoded) fuzz::check_decoders(tok, ids);
  // Special tokens parsed (HF's reading), with the post-processor's <s>.
  if (fuzz::try_encode(tok, text, ids, true, true)) fuzz::check_decoders(tok, ids);

  // The same bytes through a byte-level tokenizer with a Split regex (Llama 3's pipeline).
  static const pert::Tokenizer byte_level = pert::Tokenizer::parse(fuzz::byte_level_tokenizer(), "fuzz/byte_level.json");
  if (fuzz::try_encode(byte_level, text, ids)) {
    fuzz::check(byte_level.decode(ids) == text, "byte-level decode(encode(text)) != text");
    fuzz::check_decoders(byte_level, ids);
  }

  // Every pair of bytes as an id, in range.
  std::vector<int> raw;
  for (size_t i = 0; i + 1 < size; i += 2) raw.push_back((data[i] | data[i + 1] << 8) % tok.vocab_size());
  fuzz::check_decoders(tok, raw);
  return 0;
}

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

// encode() throws pert::Error exactly when the text is not UTF-8 (or, for a tokenizer without
// byte fallback or <unk>, when a character is missing). Returns whether it encoded.
inline bool try_encode(const pert::Tokenizer& tok, std::string_view text, std::vector<int>& ids) {
  try {
    ids = tok.encode(text);
  } catch (const pert::Error&) {
    return false;
  } catch (const std::exception& e) {
    fail(std::string("encode: non-pert exception escaped: ") + e.what());
  }
  for (int id : ids) check(id >= 0 && id < tok.vocab_size(), "encode produced id " + std::to_string(id) + " outside the vocabulary");
  return true;
}

}  // namespace fuzz

// Test harness for tests/reference/tokenizer_test.py: encodes each line of a text file.
//   pert_tokenize TOKENIZER TEXT_FILE OUT_FILE [--parse-special] [--add-special]
// TOKENIZER is a tokenizer.json or a GGUF file (its own tokenizer: Tokenizer::from_gguf).
// Special tokens written in the text stay text, as SentencePiece reads them, unless
// --parse-special (HF's behaviour); --add-special puts the post-processor's tokens around each
// line's ids.
// The text is split on "\n" exactly as Python's str.split("\n"). For each line, OUT_FILE gets
// the ids (no BOS/EOS) separated by spaces, a TAB, and "ok" when decode(encode(line)) == line,
// else "roundtrip-mismatch"; or "error" when the line is not valid UTF-8.
#include <fstream>
#include <iostream>

#include "pert/error.hpp"
#include "pert/gguf.hpp"
#include "pert/json_util.hpp"
#include "pert/tokenizer.hpp"

int main(int argc, char** argv) {
  bool parse_special = false, add_special = false, bad = argc < 4;
  for (int i = 4; i < argc; ++i) {
    const std::string flag = argv[i];
    (flag == "--parse-special" ? parse_special : flag == "--add-special" ? add_special : bad) = true;
  }
  if (bad) {
    std::cerr << "usage: pert_tokenize TOKENIZER TEXT_FILE OUT_FILE [--parse-special] [--add-special]\n";
    return 2;
  }
  try {
    const pert::Tokenizer tok = pert::is_gguf_file(argv[1]) ? pert::Tokenizer::from_gguf(pert::GgufFile(argv[1]))
                                                             : pert::Tokenizer::load(argv[1]);
    const std::string text = pert::read_text_file(argv[2], pert::kMaxTextBytes, true);
    std::ofstream out(argv[3], std::ios::binary);
    for (size_t start = 0;;) {
      const size_t end = std::min(text.find('\n', start), text.size());
      const std::string line = text.substr(start, end - start);
      try {
        const std::vector<int> ids = tok.encode(line, add_special, parse_special);
        for (size_t i = 0; i < ids.size(); ++i) out << (i ? " " : "") << ids[i];
        out << '\t' << (tok.decode(ids) == line ? "ok" : "roundtrip-mismatch") << '\n';
      } catch (const pert::Error&) {
        out << "error\n";
      }
      if (end == text.size()) break;
      start = end + 1;
    }
  } catch (const pert::Error& e) {
    std::cerr << "pert_tokenize: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

#include "tasks/pieces.hpp"

#include "pert/error.hpp"

namespace pert {

PieceEncoder::PieceEncoder(const Tokenizer& tokenizer) : tokenizer_(tokenizer), lead_(tokenizer.prefix_special()) {
  std::vector<int> ab = tokenizer.encode("a.");
  const std::vector<int> b = tokenizer.encode("b");
  ab.insert(ab.end(), b.begin(), b.end());
  own_space_ = tokenizer.decode(ab) == "a. b";  // SentencePiece's "▁b"; byte-level BPE would read "a.b"
}

const std::vector<int>& PieceEncoder::encode(const std::string& piece) const {
  auto it = known_.find(piece);
  if (it == known_.end())  // text, never special tokens ("<unk>" in WikiText is five characters)
    it = known_.emplace(piece, tokenizer_.encode(own_space_ ? piece : " " + piece, false, false)).first;
  return it->second;
}

void require_cache(const Model& model, int positions, int longest, CacheType type, const std::string& where) {
  try {
    InferenceState(model, positions, 512, 1, type);
  } catch (const Error& e) {
    std::string m = e.what();
    for (size_t at; (at = m.find("`n_ctx`")) != std::string::npos;) m.replace(at, 7, "`lengths`");
    throw Error(where + "`lengths` " + std::to_string(longest) + ": " + m);
  }
}

}  // namespace pert

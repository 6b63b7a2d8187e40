#include "pieces.hpp"

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

}  // namespace pert

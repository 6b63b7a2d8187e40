// Text pieces (sentences, needles, questions) encoded one at a time and their ids joined, as the
// tokenizer joins the sentences of one text: the rule `pert passkey` and `pert ruler` build their
// prompts by, so a prompt is exactly as long as asked and its parts stand where the rules say.
#pragma once
#include <string>
#include <unordered_map>
#include <vector>

#include "pert/tokenizer.hpp"

namespace pert {

class PieceEncoder {
 public:
  explicit PieceEncoder(const Tokenizer& tokenizer);
  // A piece's ids: SentencePiece's own leading "▁" joins it to what precedes; a tokenizer without
  // one (byte-level BPE) is given " " + piece. A piece is text: special tokens' names in it are
  // not parsed. Remembered, as the same pieces recur.
  const std::vector<int>& encode(const std::string& piece) const;
  const std::vector<int>& lead() const { return lead_; }  // the tokenizer's leading special tokens (BOS)
  const Tokenizer& tokenizer() const { return tokenizer_; }

 private:
  const Tokenizer& tokenizer_;
  std::vector<int> lead_;
  bool own_space_ = true;
  mutable std::unordered_map<std::string, std::vector<int>> known_;
};

}  // namespace pert

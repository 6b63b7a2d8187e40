// What `pert passkey` and `pert ruler` share. Text pieces (sentences, needles, questions) encoded
// one at a time and their ids joined, as the tokenizer joins the sentences of one text: the rule
// both build their prompts by, so a prompt is exactly as long as asked and its parts stand where
// the rules say. And the check, before any prompt runs, that the largest cache can be had.
#pragma once
#include <string>
#include <unordered_map>
#include <vector>

#include "pert/cache_type.hpp"
#include "pert/model.hpp"
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

// Refuses (pert::Error, `where` + "`lengths` N: " + why) when a cache of `positions` cannot be
// had for the longest prompt, N tokens; the cache's advice names `n_ctx`, which `lengths` sets here.
void require_cache(const Model& model, int positions, int longest, CacheType type, const std::string& where);

}  // namespace pert

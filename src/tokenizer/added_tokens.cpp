// Added tokens found in the text: HF AddedVocabulary's leftmost-longest split with its
// single_word, lstrip and rstrip rules.
#include <algorithm>

#include "pert/interrupt.hpp"
#include "tokenizer/internal.hpp"

namespace pert::tokenizer {

namespace {

char32_t last_char(std::string_view s) {
  size_t i = s.size();
  while (i > 0 && (static_cast<unsigned char>(s[i - 1]) & 0xc0) == 0x80) --i;
  if (i > 0) --i;
  return utf8_decode(s, i);
}

char32_t first_char(std::string_view s) {
  size_t i = 0;
  return utf8_decode(s, i);
}

}  // namespace

void AddedTokenMatcher::add(const std::string& pattern, int token) {
  if (pattern.empty()) return;
  int node = 0;
  for (unsigned char b : pattern) {
    auto& next = nodes_[size_t(node)].next;
    auto it = std::lower_bound(next.begin(), next.end(), std::make_pair(b, 0),
                               [](const auto& x, const auto& y) { return x.first < y.first; });
    if (it == next.end() || it->first != b) {
      const int fresh = int(nodes_.size());
      next.insert(it, {b, fresh});
      nodes_.emplace_back();  // (invalidates `next`; it is not used again)
      node = fresh;
    } else {
      node = it->second;
    }
  }
  nodes_[size_t(node)].token = token;
  first_byte_[static_cast<unsigned char>(pattern[0])] = true;
}

void AddedTokenMatcher::split(const Piece& piece, const std::vector<AddedToken>& tokens, bool parse_special,
                              std::vector<std::pair<Piece, int>>& out) const {
  const std::string& s = piece.text;
  const size_t n = s.size();
  if (n == 0) return;
  auto emit = [&](size_t start, size_t end, int token) {
    out.push_back({Piece{s.substr(start, end - start), piece.at_start && start == 0}, token});
  };
  size_t done = 0;  // text before this is in `out`
  size_t next_check = 0;  // a whole text is one piece: Ctrl-C is looked for every megabyte
  for (size_t i = 0; i < n;) {
    if (i >= next_check) check_interrupt(), next_check = i + (size_t(1) << 20);
    if (!first_byte_[static_cast<unsigned char>(s[i])]) {
      ++i;
      continue;
    }
    int best = -1;  // the longest token starting at i
    size_t best_end = i;
    for (size_t j = i, node = 0; j < n; ++j) {
      const auto& next = nodes_[node].next;
      auto it = std::lower_bound(next.begin(), next.end(), std::make_pair(static_cast<unsigned char>(s[j]), 0),
                                 [](const auto& x, const auto& y) { return x.first < y.first; });
      if (it == next.end() || it->first != static_cast<unsigned char>(s[j])) break;
      node = size_t(it->second);
      if (nodes_[node].token >= 0) best = nodes_[node].token, best_end = j + 1;
    }
    if (best < 0) {
      ++i;
      continue;
    }
    const AddedToken& t = tokens[size_t(best)];
    size_t start = i, stop = best_end;
    i = best_end;  // a skipped match is still consumed, as HF's matcher iterates
    if (t.special && !parse_special) continue;
    if (t.single_word) {
      const bool space_before = start == 0 || !is_word_char(last_char(std::string_view(s).substr(0, start)));
      const bool space_after = stop == n || !is_word_char(first_char(std::string_view(s).substr(stop)));
      if (!space_before || !space_after) continue;
    }
    if (t.lstrip) {
      size_t new_start = start;
      while (new_start > done) {
        size_t k = new_start - 1;
        while (k > 0 && (static_cast<unsigned char>(s[k]) & 0xc0) == 0x80) --k;
        size_t probe = k;
        if (!is_whitespace(utf8_decode(s, probe))) break;
        new_start = k;
      }
      start = new_start;
    }
    if (t.rstrip)
      for (size_t k = stop; k < n;) {
        if (!is_whitespace(utf8_decode(s, k))) break;
        stop = k;
      }
    if (done < start) emit(done, start, -1);
    emit(start, stop, best);
    done = stop;
    i = std::max(i, stop);
  }
  if (done < n) emit(done, n, -1);
}

}  // namespace pert::tokenizer

// The BPE model: characters (or their <0xNN> bytes, or <unk>) merged by rank, as HF's BPE.
#include <algorithm>
#include <cstdio>

#include "pert/interrupt.hpp"
#include "pert/json_util.hpp"
#include "tokenizer/internal.hpp"

namespace pert::tokenizer {

namespace {

uint64_t pair_key(int a, int b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }

constexpr size_t kCacheEntries = 10000;  // as HF's BPE cache: later words are not kept
constexpr size_t kCacheMaxWord = 256;
constexpr size_t kKeepSymbols = 1 << 16;  // merge_word's buffers kept between words

}  // namespace

Bpe::Bpe(const json& m, const Source& src) {
  const std::string type = m.value("type", "BPE");
  if (type != "BPE") src.fail("model.type", "'" + type + "' is not supported (pert reads BPE)");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (m.contains(key) && !m[key].is_null() && m[key] != "")
      src.fail(std::string("model.") + key, json_brief(m[key]) + " is not supported (only null or \"\")");
  if (m.contains("dropout") && !m["dropout"].is_null() && m["dropout"] != 0) src.fail("model.dropout", "is not supported (only null or 0)");
  ignore_merges_ = m.value("ignore_merges", false);
  byte_fallback_ = m.value("byte_fallback", false);
  fuse_unk_ = m.value("fuse_unk", false);

  if (!m.contains("vocab") || !m["vocab"].is_object()) src.fail("model.vocab", "must be an object of piece: id");
  for (const auto& [piece, id] : m["vocab"].items()) {
    if (!id.is_number_integer() || id.get<long long>() < 0 || id.get<long long>() >= (1 << 24))
      src.fail("model.vocab", "piece '" + piece + "' has a bad id " + json_brief(id));
    ids_.emplace(piece, id.get<int>());
    max_id_ = std::max(max_id_, id.get<int>());
  }
  for (const auto& [piece, id] : ids_)
    if (utf8_length(piece) == 1) {
      size_t i = 0;
      char_ids_.emplace(utf8_decode(piece, i), id);
    }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    auto it = ids_.find(name);
    byte_ids_[b] = it == ids_.end() ? -1 : it->second;
  }
  if (m.contains("unk_token") && !m["unk_token"].is_null()) {
    if (!m["unk_token"].is_string()) src.fail("model.unk_token", "must be a string");
    auto it = ids_.find(m["unk_token"].get<std::string>());
    if (it == ids_.end()) src.fail("model.unk_token", "'" + m["unk_token"].get<std::string>() + "' is not in the vocabulary");
    unk_ = it->second;
  }

  if (!m.contains("merges") || !m["merges"].is_array()) src.fail("model.merges", "must be a list");
  int rank = 0;
  std::string left, right;
  for (const json& merge : m["merges"]) {
    if (merge.is_string()) {  // "left right"
      const std::string& s = merge.get_ref<const std::string&>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        src.fail("model.merges", "merge " + json_brief(merge) + " is not \"left right\"");
      left.assign(s, 0, sp), right.assign(s, sp + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      left = merge[0].get<std::string>(), right = merge[1].get<std::string>();
    } else {
      src.fail("model.merges", "merge " + json_brief(merge) + " is neither \"left right\" nor [left, right]");
    }
    auto l = ids_.find(left), r = ids_.find(right), lr = ids_.find(left + right);
    if (l == ids_.end() || r == ids_.end() || lr == ids_.end())
      src.fail("model.merges", "merge " + json_brief(merge) + " names a piece that is not in the vocabulary");
    merges_[pair_key(l->second, r->second)] = {rank++, lr->second};  // a repeated pair keeps its last rank, as HF
  }
}

void Bpe::encode(std::string_view word, std::vector<int>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {  // a pre-token that is a piece is that piece (Llama 3)
    auto it = ids_.find(std::string(word));
    if (it != ids_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  if (word.size() > kCacheMaxWord) return merge_word(word, out);
  std::string key(word);
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t first = out.size(), dropped_before = dropped();
  merge_word(word, out);
  if (dropped() != dropped_before) return;  // (another thread's drop may keep a word out: harmless)
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (cache_.size() < kCacheEntries) cache_.emplace(std::move(key), std::vector<int>(out.begin() + long(first), out.end()));
}

void CandidateQueue::clear() {
  slots_.clear();
  ranks_.clear();
  used_ = 0;
}

void CandidateQueue::push(int rank, int pos) {
  const auto [it, fresh] = slots_.try_emplace(rank, used_);
  if (fresh) {
    if (used_ == buckets_.size()) buckets_.emplace_back();
    buckets_[used_++].clear();
  }
  Bucket& b = buckets_[it->second];
  if (b.empty()) {
    ranks_.push_back(rank);
    std::push_heap(ranks_.begin(), ranks_.end(), std::greater<int>());
  }
  if (b.head == b.queue.size()) b.queue.clear(), b.head = 0;
  if (b.queue.empty() || pos > b.queue.back()) {
    b.queue.push_back(pos);
  } else {
    b.side.push_back(pos);
    std::push_heap(b.side.begin(), b.side.end(), std::greater<int>());
  }
}

bool CandidateQueue::pop(int& rank, int& pos) {
  if (ranks_.empty()) return false;
  rank = ranks_.front();
  Bucket& b = buckets_[slots_.at(rank)];
  if (b.head < b.queue.size() && (b.side.empty() || b.queue[b.head] < b.side.front())) {
    pos = b.queue[b.head++];
  } else {
    std::pop_heap(b.side.begin(), b.side.end(), std::greater<int>());
    pos = b.side.back();
    b.side.pop_back();
  }
  if (b.empty()) {
    std::pop_heap(ranks_.begin(), ranks_.end(), std::greater<int>());
    ranks_.pop_back();
  }
  return true;
}

void Bpe::merge_word(std::string_view word, std::vector<int>& out) const {
  struct Symbol {
    int id, prev, next;
  };
  // Reused from word to word; a long word's memory is given back after it (a prompt of
  // megabytes is not kept for the rest of a generation).
  thread_local std::vector<Symbol> sym;
  thread_local CandidateQueue queue;
  struct GiveBack {
    ~GiveBack() {
      if (sym.capacity() > kKeepSymbols) sym = {}, queue = {};
    }
  } give_back;
  sym.clear();
  sym.reserve(word.size());  // at most a symbol a byte
  auto add = [&](int id) { sym.push_back({id, int(sym.size()) - 1, int(sym.size()) + 1}); };
  // One word may be a whole text (no pre-tokenizer): Ctrl-C is looked for every 65536 steps.
  size_t steps = 0;
  auto step = [&] {
    if ((++steps & 0xffff) == 0) check_interrupt();
  };
  int pending_unk = -1;  // HF holds an <unk> back to fuse it with the next unknown character
  for (size_t i = 0; i < word.size(); step()) {
    const size_t at = i;
    const char32_t c = utf8_decode(word, i);
    const auto known = char_ids_.find(c);
    if (known != char_ids_.end()) {
      if (pending_unk >= 0) add(pending_unk), pending_unk = -1;
      add(known->second);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (size_t k = at; k < i; ++k) all = all && byte_ids_[static_cast<unsigned char>(word[k])] >= 0;
      if (all) {  // (HF adds these before a held-back <unk>, and so does pert)
        for (size_t k = at; k < i; ++k) add(byte_ids_[static_cast<unsigned char>(word[k])]);
        continue;
      }
    }
    if (unk_ < 0) {  // HF drops a character it has no token for
      dropped_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    if (pending_unk >= 0 && !fuse_unk_) add(pending_unk);
    pending_unk = unk_;
  }
  if (pending_unk >= 0) add(pending_unk);
  if (sym.empty()) return;
  sym.back().next = -1;

  // Merge the adjacent pair of lowest rank, leftmost first, until none applies. A popped
  // candidate whose pair has changed since is stale, known by its pair's rank (one pair a rank).
  auto merge_at = [&](int i) -> const std::pair<int, int>* {  // (rank, merged id) of i's pair
    if (i < 0 || sym[size_t(i)].id < 0 || sym[size_t(i)].next < 0) return nullptr;
    auto it = merges_.find(pair_key(sym[size_t(i)].id, sym[size_t(sym[size_t(i)].next)].id));
    return it == merges_.end() ? nullptr : &it->second;
  };
  queue.clear();
  auto consider = [&](int i) {
    if (const auto* m = merge_at(i)) queue.push(m->first, i);
  };
  for (int i = 0; i < int(sym.size()); ++i, step()) consider(i);
  int rank = 0, pos = 0;
  for (; queue.pop(rank, pos); step()) {
    const auto* m = merge_at(pos);
    if (!m || m->first != rank) continue;  // stale
    Symbol& left = sym[size_t(pos)];
    Symbol& right = sym[size_t(left.next)];
    left.id = m->second;
    right.id = -1;
    left.next = right.next;
    if (left.next >= 0) sym[size_t(left.next)].prev = pos;
    consider(left.prev);
    consider(pos);
  }
  for (int i = 0; i >= 0; i = sym[size_t(i)].next) out.push_back(sym[size_t(i)].id);
}

}  // namespace pert::tokenizer

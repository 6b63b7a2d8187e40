// The parts of pert's tokenizer.json pipeline (HF tokenizers' semantics, byte offsets only).
//
// Implemented, anything else is refused naming the key:
//   model        BPE: vocab, merges ("a b" or [a, b]), byte_fallback, fuse_unk, unk_token,
//                ignore_merges; continuing_subword_prefix / end_of_word_suffix null or "";
//                dropout null or 0
//   normalizer   NFC NFD NFKC NFKD Lowercase Strip Prepend Replace Sequence
//   pre_tokenizer ByteLevel Split Digits Metaspace Whitespace WhitespaceSplit Sequence
//   decoder      ByteLevel Metaspace ByteFallback Fuse Strip Replace Sequence (null: join with " ")
//   post_processor TemplateProcessing ByteLevel BertProcessing RobertaProcessing Sequence
//   added_tokens special lstrip rstrip single_word normalized
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "pert/error.hpp"

struct pcre2_real_code_8;

namespace pert {
class GgufFile;
}

namespace pert::tokenizer {

using nlohmann::json;

// Reading a tokenizer.json: the file's name, for errors that name it and the key.
struct Source {
  std::string where;
  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw FormatError(where + ": " + key + " " + what);
  }
  // `key`'s "type" string (an error when missing).
  std::string type_of(const json& j, const std::string& key) const;
};

// --- unicode.cpp: UTF-8 and character classes --------------------------------------------------
size_t utf8_char_len(std::string_view s, size_t i);  // of the valid character at s[i], 0 if bad
char32_t utf8_decode(std::string_view s, size_t& i);   // the character at s[i] (valid), i moves past it
void utf8_append(std::string& out, char32_t c);
size_t utf8_length(std::string_view s);                 // in characters (valid input)
// Invalid sequences replaced by U+FFFD, one per maximal subpart (Rust's from_utf8_lossy).
std::string utf8_lossy(std::string_view s);
bool is_whitespace(char32_t c);  // Unicode White_Space (Rust's char::is_whitespace)
bool is_numeric(char32_t c);     // Nd, Nl, No (Rust's char::is_numeric)
bool is_word_char(char32_t c);   // \w: letters, marks, Nd, Nl, Pc, ZWJ/ZWNJ
enum class NormalForm { NFC, NFD, NFKC, NFKD };
std::string unicode_normalize(std::string_view s, NormalForm form);
std::string unicode_lowercase(std::string_view s);
// GPT-2's byte-level alphabet: each byte as a printable character, and back (-1: not one).
const std::string& byte_to_char(unsigned char b);
int char_to_byte(char32_t c);

// --- regex.cpp: PCRE2 patterns and HF's {"String": ...} / {"Regex": ...} ------------------------
using MatchSink = std::function<void(size_t start, size_t end)>;  // one match, as byte offsets

class Regex {
 public:
  // Compiles `pattern` (Oniguruma syntax as HF writes it); a bad one is a FormatError naming
  // `where` (file and key) and PCRE2's message.
  Regex(const std::string& pattern, const std::string& where);
  // Each non-overlapping match in `s`, in Oniguruma's order (an empty match right after the
  // previous match is skipped), as it is found. Throws Error naming `where` when PCRE2 gives up
  // (match, depth or heap limit: a pattern that backtracks without end on this input).
  void for_each_match(std::string_view s, const MatchSink& sink) const;

 private:
  std::shared_ptr<pcre2_real_code_8> code_;
  std::string where_;
};

// What Split, Replace (normalizer and decoder) match: a literal string or a regex.
class Pattern {
 public:
  Pattern(const json& j, const Source& src, const std::string& key);
  void for_each_match(std::string_view s, const MatchSink& sink) const;
  // A literal of one character (so it can never match across two tokens' text).
  bool single_char() const { return !regex_ && utf8_length(literal_) == 1; }
  const std::string& literal() const { return literal_; }
  bool is_regex() const { return bool(regex_); }

 private:
  std::string literal_;
  std::shared_ptr<Regex> regex_;
};
std::string replace_all(std::string_view s, const Pattern& p, const std::string& content);

// --- normalizers.cpp ----------------------------------------------------------------------------
struct Normalizer {
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& s) const = 0;
};
std::unique_ptr<Normalizer> parse_normalizer(const json& j, const Source& src, const std::string& key);

// --- pre_tokenizers.cpp -------------------------------------------------------------------------
struct Piece {
  std::string text;
  bool at_start;  // begins at offset 0 of the whole input (Metaspace's prepend_scheme "first")
};
using PieceSink = std::function<void(Piece& part)>;  // may consume (move from) the part
struct PreTokenizer {
  virtual ~PreTokenizer() = default;
  // Hands `piece`'s parts to `sink` in order as they are found (empty parts are dropped, as HF
  // does): a text is encoded a pre-token at a time, never holding all its pre-tokens at once.
  virtual void split(Piece& piece, const PieceSink& sink) const = 0;
};
std::unique_ptr<PreTokenizer> parse_pre_tokenizer(const json& j, const Source& src, const std::string& key);

// --- bpe.cpp ------------------------------------------------------------------------------------
// A word's merge candidates, popped in HF's order: lowest rank first, then leftmost. They are
// kept by rank because within one rank they mostly arrive left to right: those wait in a
// queue and the few others in a small heap, so a long word (a run of a million spaces is one
// pre-token) costs O(1) a candidate, not a million-entry heap's O(log n) cache misses.
class CandidateQueue {
 public:
  void clear();
  void push(int rank, int pos);
  bool pop(int& rank, int& pos);  // false when empty

 private:
  struct Bucket {
    std::vector<int> queue, side;  // positions: in increasing order from queue[head]; a min-heap
    size_t head = 0;
    bool empty() const { return head == queue.size() && side.empty(); }
    void clear() { queue.clear(), side.clear(), head = 0; }
  };
  std::unordered_map<int, size_t> slots_;  // rank -> its bucket
  std::vector<Bucket> buckets_;            // [0, used_) in use; the rest keep their memory
  size_t used_ = 0;
  std::vector<int> ranks_;  // min-heap of the ranks whose bucket is not empty
};

class Bpe {
 public:
  Bpe(const json& model, const Source& src);
  // The model's vocabulary, id -> piece ("" for ids only added tokens use).
  const std::unordered_map<std::string, int>& vocab() const { return ids_; }
  int max_id() const { return max_id_; }
  // Appends the ids of one pre-token.
  void encode(std::string_view word, std::vector<int>& out) const;
  // Characters encode() has dropped so far: those with no piece, no <unk> and no byte fallback.
  size_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

 private:
  std::unordered_map<std::string, int> ids_;
  std::unordered_map<char32_t, int> char_ids_;                // one-character pieces
  std::unordered_map<uint64_t, std::pair<int, int>> merges_;  // (left, right) -> (rank, merged id)
  int byte_ids_[256];                                         // <0xNN> ids (-1: none)
  int unk_ = -1, max_id_ = -1;
  bool byte_fallback_ = false, fuse_unk_ = false, ignore_merges_ = false;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int>> cache_;  // pre-token -> ids (none dropped)
  mutable std::atomic<size_t> dropped_{0};

  void merge_word(std::string_view word, std::vector<int>& out) const;
};

// --- decoders.cpp -------------------------------------------------------------------------------
struct Decoder {
  virtual ~Decoder() = default;
  // HF's decode_chain on the tokens' strings; `at_start`: tokens[0] is the first of the text.
  virtual void decode(std::vector<std::string>& tokens, bool at_start) const = 0;
};
// How the chain behaves on a stream (see StreamDecoder in tokenizer.cpp).
struct StreamTraits {
  bool buffered = false;     // output can change before its end: stream only at flush
  bool restartable = true;   // decoding may restart after a complete, non-empty text
  bool byte_fallback = false;  // trailing <0xNN> runs stay undecided until a non-byte token
};
std::unique_ptr<Decoder> parse_decoder(const json& j, const Source& src, const std::string& key, StreamTraits& traits);
bool byte_fallback_token(std::string_view token, unsigned char* byte = nullptr);

// --- post_processors.cpp ------------------------------------------------------------------------
struct Specials {
  std::vector<int> prefix, suffix;  // around a single sequence
};
// `find` resolves a token's content to its id (for Bert/Roberta, which name tokens).
Specials parse_post_processor(const json& j, const Source& src, const std::string& key, int vocab_size);

// --- added_tokens.cpp ---------------------------------------------------------------------------
struct AddedToken {
  std::string content;
  int id;
  bool special, lstrip, rstrip, single_word, normalized;
};
// HF's AddedVocabulary split: leftmost-longest matches of the tokens in a text.
class AddedTokenMatcher {
 public:
  void add(const std::string& pattern, int token);  // `token`: index into the added tokens
  bool empty() const { return nodes_.size() <= 1; }
  // Splits `piece` into pieces (token -1) and matched tokens, honouring lstrip / rstrip /
  // single_word; tokens[i].special ones are skipped unless `parse_special`.
  void split(const Piece& piece, const std::vector<AddedToken>& tokens, bool parse_special,
             std::vector<std::pair<Piece, int>>& out) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int>> next;  // sorted by byte
    int token = -1;
  };
  std::vector<Node> nodes_ = std::vector<Node>(1);
  bool first_byte_[256] = {};
};

// --- gguf_vocab.cpp ----------------------------------------------------------------------------
// The tokenizer.json document that means what a GGUF file's tokenizer.ggml.* metadata means to
// llama.cpp. Throws FormatError naming the file and the GGUF key.
json tokenizer_json_from_gguf(const GgufFile& file);

// --- tokenizer.cpp ------------------------------------------------------------------------------
struct Data {
  std::string where;
  std::vector<std::string> pieces;  // id -> piece ("" for an unused id)
  std::vector<bool> present;        // whether an id is used
  std::unordered_map<std::string, int> ids;  // added tokens first, then the model's vocabulary
  std::vector<bool> special;
  std::vector<AddedToken> added;
  AddedTokenMatcher raw_matcher, normalized_matcher;
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<Bpe> model;
  std::unique_ptr<Decoder> decoder;  // null: tokens joined with " "
  StreamTraits stream;
  Specials specials;

  // decode() of ids[0, n) where ids[0] is the text's first token when `at_start`.
  std::string decode(const int* ids, size_t n, bool at_start) const;
  void check_id(int id) const;
};

}  // namespace pert::tokenizer

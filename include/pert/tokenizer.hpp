// Tokenizer for HF `tokenizer.json` files of the llama / SentencePiece-BPE kind: a BPE model
// with `vocab`, rank-ordered `merges` and `byte_fallback`; the "▁" space normalizer with a
// prepended "▁" (as a Prepend+Replace normalizer or a Metaspace pre-tokenizer); added
// (special) tokens. Text is encoded as text: "<s>" in a prompt is three characters, as
// SentencePiece does; special tokens enter only by id.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace pert {

class Tokenizer {
 public:
  // Reads and validates tokenizer.json. Throws IoError / FormatError naming the file.
  static Tokenizer load(const std::filesystem::path& path);
  // The same from the text of a tokenizer.json; `where` names it in errors.
  static Tokenizer parse(std::string_view text, const std::string& where);

  // Token ids of `text` (no BOS/EOS). Throws Error when `text` is not valid UTF-8.
  std::vector<int> encode(std::string_view text) const;
  // Text of `ids`: pieces with "▁" as spaces, <0xNN> runs as bytes, special tokens dropped,
  // and the space the normalizer prepended removed.
  std::string decode(const std::vector<int>& ids) const;

  int vocab_size() const { return int(pieces_.size()); }
  const std::string& piece(int id) const { return pieces_.at(size_t(id)); }
  std::optional<int> find(const std::string& piece) const;
  bool is_special(int id) const { return special_.at(size_t(id)); }
  // The bytes one token stands for: its piece with "▁" as spaces, the byte of a <0xNN>
  // token, nothing for a special token.
  std::string token_text(int id) const;
  // Whether the normalizer prepends "▁" (so decoding strips one leading space).
  bool adds_prefix_space() const { return prefix_space_; }

 private:
  std::vector<std::string> pieces_;        // id -> piece
  std::unordered_map<std::string, int> ids_;
  std::unordered_map<uint64_t, std::pair<int, int>> merges_;  // (left, right) -> (rank, merged id)
  std::vector<bool> special_;
  std::vector<int> byte_of_;               // id -> the byte of a <0xNN> token, or -1
  int byte_token_[256];                    // byte -> its <0xNN> id, or -1
  int unk_ = -1;
  bool byte_fallback_ = false, fuse_unk_ = false;
  bool prefix_space_ = false;              // prepend "▁" to non-empty text
  bool space_to_meta_ = false;             // " " -> "▁"
  bool split_words_ = false;               // Metaspace split: merges stay inside "▁word" pieces

  void encode_word(std::string_view word, std::vector<int>& out) const;
  static Tokenizer from_json(const nlohmann::json& j, const std::string& where);
};

// Turns a stream of token ids into text as it comes: bytes of a UTF-8 character split over
// several <0xNN> tokens are held until the character is complete.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer) : tok_(tokenizer) {}
  std::string push(int id);  // text that became complete with this token
  std::string flush();       // whatever is held back (an incomplete character at the end)

 private:
  const Tokenizer& tok_;
  std::string pending_;  // bytes of an incomplete UTF-8 character
  bool at_start_ = true;
};

// Whether `s` is well-formed UTF-8; `bad_at` receives the offset of the first bad byte.
bool valid_utf8(std::string_view s, size_t* bad_at = nullptr);

}  // namespace pert

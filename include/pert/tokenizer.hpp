// Tokenizer for HF `tokenizer.json` files with a BPE model, run as HF's tokenizers library
// runs them: added tokens are found in the text first, the text between them goes through the
// normalizer, the pre-tokenizer and the BPE model; the post-processor adds the special tokens
// around a sequence; the decoder turns ids back into text. What pert implements is listed in
// src/tokenizer/internal.hpp; anything else in a file is refused with the key named.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace pert {

namespace tokenizer {
struct Data;
}
class GgufFile;

class Tokenizer {
 public:
  Tokenizer();  // an empty tokenizer (no tokens); assign a loaded one to use it

  // Reads and validates tokenizer.json. Throws IoError / FormatError naming the file.
  static Tokenizer load(const std::filesystem::path& path);
  // DIR/tokenizer.json; when it has no post-processor, DIR/tokenizer_config.json's
  // add_bos_token / add_eos_token (with bos_token / eos_token) say what add_special adds.
  static Tokenizer load_dir(const std::filesystem::path& dir);
  // The same as load from the text of a tokenizer.json; `where` names it in errors.
  static Tokenizer parse(std::string_view text, const std::string& where);
  // The tokenizer a GGUF file carries (llama.cpp's tokenizer.ggml.* metadata), read as the
  // tokenizer.json it translates to (src/tokenizer/gguf_vocab.cpp). Throws FormatError naming
  // the file and the key.
  static Tokenizer from_gguf(const GgufFile& file);

  // Token ids of `text`. `add_special`: with the post-processor's special tokens around it
  // (e.g. <s> first). `parse_special`: special added tokens written in the text ("<s>") are
  // those tokens, as HF does; false: they are text, as SentencePiece does. Throws Error when
  // `text` is not valid UTF-8 or a regex gives up on it (naming the tokenizer file).
  std::vector<int> encode(std::string_view text, bool add_special = false, bool parse_special = true) const;
  // Characters encode() has dropped so far (over every call, any thread): a character with no
  // piece, no <unk> token and no byte fallback is left out, as HF's tokenizers leave it out, so
  // the ids are of another text. A front end compares the count before and after encoding a
  // text and says so (pert::dropped_note).
  size_t dropped_characters() const;
  // Text of `ids` through the decoder, special tokens skipped (HF's skip_special_tokens).
  std::string decode(const std::vector<int>& ids) const;

  int vocab_size() const;
  const std::string& piece(int id) const;
  std::optional<int> find(const std::string& piece) const;
  bool is_special(int id) const;
  // The text one token decodes to in the middle of a text (a special token: its content).
  std::string token_text(int id) const;
  // The ids the post-processor puts before / after a single sequence (add_special).
  const std::vector<int>& prefix_special() const;
  const std::vector<int>& suffix_special() const;

 private:
  // A tokenizer.json document already parsed (parse's text, or what from_gguf translates).
  static Tokenizer from_document(const nlohmann::json& document, const std::string& where);
  std::shared_ptr<const tokenizer::Data> d_;
  friend class StreamDecoder;
};

// Turns a stream of token ids into text as it comes, equal in the end to decode() of them all:
// text that later tokens could still change (bytes of a UTF-8 character split over tokens, a
// run of byte-fallback tokens) is held back until it cannot.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer);
  // Takes `context` (e.g. the prompt) as already shown: push() then gives what follows it.
  void prime(const std::vector<int>& context);
  std::string push(int id);  // text that became certain with this token
  std::string flush();       // whatever is held back (e.g. an incomplete character at the end)

 private:
  const Tokenizer& tok_;
  std::vector<int> window_;  // ids since the last point where decoding could restart
  size_t emitted_ = 0;       // bytes of the window's text already returned
  bool at_start_ = true;     // the window starts the text (the decoder strips a leading space)
  // [vocab] each ordinary token's text when decoded alone, not at the start, for decoders that
  // restart (empty otherwise): the common step then decodes nothing and allocates nothing.
  std::vector<std::string> alone_;

  std::string advance(bool final);
};

// "TEXT: 3 characters that the tokenizer cannot encode (no piece, no <unk>, no byte fallback) were
// left out, as HF's tokenizers leave them out: the ids are of the text without them"; "" for 0.
std::string dropped_note(size_t dropped, const std::string& text_name);

// Whether `s` is well-formed UTF-8; `bad_at` receives the offset of the first bad byte.
bool valid_utf8(std::string_view s, size_t* bad_at = nullptr);

}  // namespace pert

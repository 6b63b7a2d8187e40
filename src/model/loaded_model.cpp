#include "pert/loaded_model.hpp"

#include "pert/error.hpp"
#include "pert/gguf.hpp"
#include "pert/json_util.hpp"

namespace pert {

LoadedModel load_model(const std::filesystem::path& dir, const ConfigOverrides& overrides, WeightType type) {
  LoadedModel m{dir, Model::load(dir, overrides, type), {}, {}};
  const std::filesystem::path tok_path = m.model->gguf() ? dir : dir / "tokenizer.json";
  m.tokenizer = m.model->gguf() ? Tokenizer::from_gguf(*m.model->gguf()) : load_tokenizer(dir);
  const ModelConfig& c = m.model->config();
  if (c.trained && position_identity(*c.trained) != position_identity(c))
    m.note = dir.string() + " was trained with " + position_identity(*c.trained) + " positions; running " +
             position_label(c) + " (`allow_scheme_change`)";
  const int model_vocab = c.vocab_size;
  if (m.tokenizer.vocab_size() > model_vocab)
    throw ConfigError(tok_path.string() + ": " + std::to_string(m.tokenizer.vocab_size()) +
                      " tokens, but the model has " + std::to_string(model_vocab));
  return m;
}

Tokenizer load_tokenizer(const std::filesystem::path& model) {
  if (is_gguf_file(model)) return Tokenizer::from_gguf(GgufFile(model));
  if (!std::filesystem::exists(model / "tokenizer.json"))
    throw IoError((model / "tokenizer.json").string() + ": missing (tools/convert/convert_llama2c.py writes one next to the weights)");
  return Tokenizer::load_dir(model);
}

std::string read_utf8_file(const std::filesystem::path& path) {
  std::string text = read_text_file(path, kMaxTextBytes, /*streams=*/true);
  size_t bad = 0;
  if (!valid_utf8(text, &bad)) throw FormatError(path.string() + ": not valid UTF-8 (byte " + std::to_string(bad) + ")");
  return text;
}

std::vector<int> tokenize_text_llama(const Tokenizer& tokenizer, std::string_view text) {
  return tokenizer.encode(text, /*add_special=*/true, /*parse_special=*/false);
}

std::vector<int> tokenize_file_llama(const Tokenizer& tokenizer, const std::filesystem::path& path) {
  std::string text = read_utf8_file(path);
  if (!text.empty() && text.back() == '\n') text.pop_back();  // as llama.cpp's -f reads a file
  return tokenize_text_llama(tokenizer, text);
}

std::vector<int> tokenize_text(const Tokenizer& tokenizer, std::string_view text, int bos, bool split_docs) {
  if (!split_docs) return tokenizer.encode(text);
  std::vector<int> ids;
  const char* space = " \t\n\r\v\f";
  for (size_t at = 0; at <= text.size();) {
    size_t end = text.find("\n\n", at);
    if (end == std::string::npos) end = text.size();
    const size_t a = text.find_first_not_of(space, at);
    if (a != std::string::npos && a < end) {
      const size_t b = text.find_last_not_of(space, end - 1);
      if (bos >= 0) ids.push_back(bos);
      for (int id : tokenizer.encode(text.substr(a, b + 1 - a))) ids.push_back(id);
    }
    at = end + 2;
  }
  return ids;
}

std::vector<int> tokenize_file(const Tokenizer& tokenizer, const std::filesystem::path& path, int bos, bool split_docs) {
  return tokenize_text(tokenizer, read_utf8_file(path), bos, split_docs);
}

std::vector<int> prompt_tokens(const Tokenizer& tokenizer, std::string_view text) {
  std::vector<int> ids = tokenizer.prefix_special();
  for (int id : tokenizer.encode(text)) ids.push_back(id);
  return ids;
}

}  // namespace pert

// A model directory with its tokenizer, and texts read as pert reads them: what the CLI and
// the Python module share above the model itself.
#pragma once
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pert/config.hpp"
#include "pert/model.hpp"
#include "pert/tokenizer.hpp"

namespace pert {

// A model directory loaded with its tokenizer.json (which must fit the model's vocabulary).
struct LoadedModel {
  std::filesystem::path dir;
  std::unique_ptr<Model> model;
  Tokenizer tokenizer;
  // Said when the overrides run another scheme than the trained one (--allow-scheme-change),
  // e.g. "models/rope was trained with rope positions; running alibi"; empty otherwise.
  std::string note;
};
LoadedModel load_model(const std::filesystem::path& dir, const ConfigOverrides& overrides,
                       WeightType type = WeightType::Auto);

// A model's tokenizer alone: a directory's tokenizer.json, or a GGUF file's metadata.
Tokenizer load_tokenizer(const std::filesystem::path& model);

// A file's text, refused (naming the file) when it is not valid UTF-8.
std::string read_utf8_file(const std::filesystem::path& path);

// A text as token ids: the whole text at once, or with `split_docs` each document (separated
// by a blank line, "\n\n", and stripped of surrounding whitespace) encoded on its own with
// `bos` before it, as tools/train/train.py feeds stories to the family.
std::vector<int> tokenize_text(const Tokenizer& tokenizer, std::string_view text, int bos, bool split_docs);
std::vector<int> tokenize_file(const Tokenizer& tokenizer, const std::filesystem::path& path, int bos, bool split_docs);
// A text as llama-perplexity tokenizes it (common_tokenize(text, add_special = true)): special
// tokens written in the text taken as text, the tokenizer's own prefix (BOS) and suffix around
// it. A file is read as its -f reads one (common/arg.cpp): one trailing "\n" dropped.
std::vector<int> tokenize_text_llama(const Tokenizer& tokenizer, std::string_view text);
std::vector<int> tokenize_file_llama(const Tokenizer& tokenizer, const std::filesystem::path& path);

// A generation prompt as `pert generate` makes it: the tokens the tokenizer's post-processor
// puts first (e.g. <s>), then the text.
std::vector<int> prompt_tokens(const Tokenizer& tokenizer, std::string_view text);

}  // namespace pert

// A model directory: config.json (+ overrides) and its safetensors, checked against each other.
#pragma once
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pert/config.hpp"
#include "pert/gguf.hpp"
#include "pert/safetensors.hpp"

namespace pert {

// Every tensor a config needs, in forward-pass order (HF llama names, docs/design.md).
std::vector<ExpectedTensor> expected_tensors(const ModelConfig& config);

struct ModelDir {
  std::filesystem::path dir;
  nlohmann::json config_json;  // config.json after overrides
  ModelConfig config;
  Checkpoint checkpoint;
  std::shared_ptr<const GgufFile> gguf;  // a GGUF file's own (metadata, tokenizer); null for a directory
  std::vector<std::string> checks;  // what was verified, in words, for `pert inspect`
};

// Opens and validates a model directory: the config, every safetensors file, and that the
// tensors are exactly the ones the config needs with the shapes it implies. Or a GGUF file,
// its metadata read as config.json (gguf_model.hpp).
// Throws IoError / FormatError / ConfigError naming the file and the problem.
ModelDir open_model_dir(const std::filesystem::path& dir, const ConfigOverrides& overrides = {});

// The files of `dir` a model is read from, those present: config.json, generation_config.json,
// tokenizer.json, tokenizer_config.json, the safetensors index and every *.safetensors (so a
// result is never written over one); a GGUF file is its own only file.
std::vector<std::filesystem::path> model_dir_files(const std::filesystem::path& dir);

}  // namespace pert

// A GGUF file read as pert reads a model directory (model_dir.hpp): its metadata become an
// HF-style config.json, so overrides, the scheme guard and every check apply unchanged, and
// its tensors become views under HF's names in HF's row order.
//
// Where GGUF means something else than HF, pert follows llama.cpp's reading (src/llama-model.cpp,
// convert_hf_to_gguf.py):
//   - architecture `llama` (Llama 1-3, Mistral, TinyLlama, SmolLM): the converter permuted the
//     rows of attn_q and attn_k within each head for interleaved-pair RoPE; they are put back
//     in HF's order at open (a copy of those two matrices), so pert's half-layout RoPE applies;
//   - rope.scaling.factor is the factor itself (llama.cpp's freq_scale is its inverse);
//     the old key rope.scale_linear is a linear factor;
//   - missing keys take llama.cpp's defaults: head_count_kv = head_count, key_length =
//     embedding_length / head_count, rope.freq_base 10000, rope.dimension_count = key_length;
//   - a `rope_freqs` tensor (Llama 3's per-pair frequency factors) divides each pair's
//     frequency, which is LongRoPE's form with one list and attention factor 1; phi3's
//     rope_factors_long/short are LongRoPE's lists, applied whenever the file has them (as
//     llama.cpp does), rope.scaling.type or not.
//   - no `output` tensor: the output matrix is the embedding (tied);
//   - attention.sliding_window windows every layer (llama's: read as Mistral).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pert/config.hpp"
#include "pert/gguf.hpp"
#include "pert/safetensors.hpp"

namespace pert {

// The config.json a model directory would hold for this file. Throws FormatError naming the
// file and the GGUF key.
nlohmann::json gguf_config_json(const GgufFile& file);

// The file's tensors under HF names, checked against `config` by the caller as safetensors are.
// Throws FormatError naming the file and the tensor.
Checkpoint gguf_checkpoint(std::shared_ptr<const GgufFile> file, const ModelConfig& config);

// What the file's general.file_type calls its mix (llama.cpp's names: "Q4_K_M", "F16", ...),
// or "GGUF" when the key is absent or unknown.
std::string gguf_file_type(const GgufFile& file);

// "blk.3.attn_q.weight" -> "model.layers.3.self_attn.q_proj.weight" (empty when not a model tensor).
// `architecture` is the HF name the config gives (its GGUF tensor names: src/model/architectures/).
std::string hf_tensor_name(const std::string& gguf_name, const std::string& architecture);

}  // namespace pert

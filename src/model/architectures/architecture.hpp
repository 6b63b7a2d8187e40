// An HF architecture pert reads, as one plug-in: its names (HF class, model_type, GGUF
// general.architecture), the config keys it reads, how those keys set the block's extras and
// which layers see a window, and what its GGUF metadata and tensor names mean. Each lives in its
// own file in this folder, listed once in architecture_registry.cpp (docs/adding-an-architecture.md).
// The forward pass itself is one for all: an architecture is llama's block plus the ModelConfig
// flags it sets (biases, norms, fused projections, windows, ...).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/config_fields.hpp"
#include "model/tensor_names.hpp"
#include "pert/config.hpp"
#include "pert/safetensors.hpp"

namespace pert {

class GgufFile;
class Checkpoint;  // safetensors.hpp
struct VisionLanguageLayout;  // below

// A GGUF layer part ("ffn_up") and the HF part it holds in this architecture, where that differs
// from llama's table (architecture_registry.cpp) or the part exists only here (Gemma's post norms).
struct GgufPart {
  const char* gguf;
  tensor_names::Part hf;
};

// Where a layer's experts are, under "model.layers.N.": the router "<router>.weight" [E][d], and
// expert e's matrices "<experts>.<e>.<gate|up|down>.weight" (Qwen's names; Mixtral's are its own).
struct MoeTensorNames {
  const char* router = "mlp.gate";
  const char* experts = "mlp.experts";
  const char *gate = "gate_proj", *up = "up_proj", *down = "down_proj";
  const char* shared = "mlp.shared_expert";  // its gate_proj, up_proj, down_proj (DeepSeek: mlp.shared_experts)
};

struct ArchitectureSpec {
  const char* hf_name;     // config.json's architectures[0], e.g. "Qwen2ForCausalLM"
  const char* model_type;  // config.json's model_type, e.g. "qwen2"
  const char* gguf_name;   // GGUF general.architecture; "" where llama.cpp writes another's (Mistral: llama)
  // Config keys read beyond common_config_keys(), space-separated (HF's configuration_*.py). Another
  // architecture's key is refused, unless listed in `ignores`: carried by this architecture's
  // published configs and ignored by HF's model too.
  const char* reads;
  const char* ignores;
  bool attention_bias = false;  // attention_bias: true gives q/k/v/o biases (else refused when true)
  bool mlp_bias = false;        // mlp_bias: true gives gate/up/down biases
  // Sets the block's extras in mc from the config's keys, and says which layers see the window.
  // `window` comes in as sliding_window (0 when absent) and may be changed (Qwen: off unless
  // use_sliding_window); `layers` may give layers their own schemes (Gemma 3's local RoPE). Null:
  // llama's block, every layer windowed when a window is set.
  std::vector<bool> (*parse)(Fields& f, ModelConfig& mc, int& window, ArchitectureLayers& layers) = nullptr;
  // Writes into config.json's form `c` what this architecture's GGUF keys say beyond the common
  // ones (gguf_model.cpp); prefix is "{general.architecture}.". Null: nothing.
  void (*from_gguf)(const GgufFile& f, const std::string& prefix, nlohmann::json& c) = nullptr;
  // llama.cpp's converter permuted attn_q/attn_k's rows for interleaved-pair RoPE (LlamaModel and
  // its subclasses); undone at open.
  bool gguf_permuted_qk = false;
  std::vector<GgufPart> gguf_parts = {};
  MoeTensorNames moe_names = {};  // (architectures with experts)
  // The checkpoint's tensors as the expected ones (expected_tensors), where the architecture
  // stores them otherwise (gpt-oss: experts fused, interleaved, in MXFP4); what it did, if
  // anything, said in `notes` (pert inspect's checks). Null: as stored.
  Checkpoint (*checkpoint)(Checkpoint stored, const ModelConfig& c, std::vector<std::string>& notes) = nullptr;
  // A vision-language checkpoint (HF *ForConditionalGeneration), whose language model pert runs:
  // its vision tower's tensor-name prefixes, space-separated, skipped at load; its config keys
  // may sit under text_config, its tensors under the names of `language_model`
  // (vision_language.cpp). Null: a text model.
  const char* vision_tensors = nullptr;
  const VisionLanguageLayout* language_model = nullptr;
};

// Where a vision-language checkpoint keeps its parts (one table per family, vision_language()).
struct VisionLanguageLayout {
  const char* vision;  // the vision tower's and projector's tensor-name prefixes, space-separated
  // The ways the language model's tensors are named, each "stored=pert" prefix renames,
  // space-separated (an identity marks pert's own names); a checkpoint holds one of them.
  const char* language_model[3];
  // text_config's keys as the HF text config class defaults them (JSON), set where config.json
  // leaves them out; null: none beyond the architecture's own.
  const char* text_defaults;
};
// Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Qwen3-VL-MoE: visual.* (v4) / model.visual.* (v5); the
// language model under model.language_model. (v5, Qwen3-VL as published) or model. (v4).
extern const VisionLanguageLayout kQwenVisionLanguage;

// The registry (architecture_registry.cpp).
const std::vector<const ArchitectureSpec*>& architectures();
// By HF name, else by model_type when the name is empty; Llama when both are (pert's own
// configs); null when unknown.
const ArchitectureSpec* find_architecture(const std::string& hf_name, const std::string& model_type);
const ArchitectureSpec& architecture_spec(const std::string& hf_name);  // of a parsed config; Llama if unknown
const ArchitectureSpec* gguf_architecture(const std::string& gguf_name);  // null when unknown
std::string known_gguf_architectures();  // "llama, qwen2, ..."

// An MoE layer's tensors, by the architecture's names (MoeTensorNames); Qwen2-MoE's shared expert
// is behind "mlp.shared_expert_gate" [1][d].
enum class ExpertPart { Gate, Up, Down };
// (kind: "weight", or "bias" for gpt-oss's, "e_score_correction_bias" for DeepSeek V3's router)
std::string router_tensor(const ModelConfig& c, int layer, const char* kind = "weight");
std::string expert_tensor(const ModelConfig& c, int layer, int expert, ExpertPart part, const char* kind = "weight");
std::string shared_expert_tensor(const ModelConfig& c, int layer, ExpertPart part);
std::string shared_expert_gate_tensor(int layer);

// Helpers the architecture files share (architecture_common.cpp).
// The experts' count from `count_key` (HF's default def_experts) and num_experts_per_tok
// (def_used), every layer sparse; their width is set by the caller.
void read_experts(Fields& f, ModelConfig& mc, const char* count_key, int def_experts, int def_used);
// Qwen2-MoE's and Qwen3-MoE's experts (num_experts, num_experts_per_tok, moe_intermediate_size
// with HF's defaults; norm_topk_prob, default false), dense layers (mlp_only_layers, and all but
// every decoder_sparse_step-th), and windows: use_sliding_window refused (pert does not compute
// them). Returns the windowed layers: none.
std::vector<bool> qwen_moe(Fields& f, ModelConfig& mc, int& window, int experts, int used, int width);
// transformers v5's fused experts, as save_pretrained(save_original_format=False) writes its
// in-memory layout (conversion_mapping.py): in each sparse layer mlp.experts.gate_up_proj
// [E][2·ff][d] (expert e's gate rows, then its up rows) and mlp.experts.down_proj [E][d][ff], and
// Mixtral's router renamed mlp.gate. Read as the tensors expert_tensor and router_tensor name,
// views of the same bytes (F32, F16, BF16). Both forms in one layer, half a pair, or a fused tensor
// of another shape or dtype: ConfigError naming it. Unchanged when nothing is fused.
// (ArchitectureSpec::checkpoint of Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE and DeepSeek.)
Checkpoint fused_experts_checkpoint(Checkpoint stored, const ModelConfig& c, std::vector<std::string>& notes);
// A checkpoint of `views` (renamed, split, some left out) into `from`'s tensors, which it keeps
// alive; its storage() null or not as `from`'s (rows read in place only from a GGUF file's).
// `buffers` hold the bytes of views made at open (transposed copies), kept with them.
Checkpoint checkpoint_views(Checkpoint from, std::vector<TensorView> views, std::vector<std::vector<uint8_t>> buffers = {});
// fused_experts_checkpoint's layout, or the fused experts input-first, as Qwen3-VL-MoE's
// checkpoints are published (gate_up_proj [E][d][2·ff], gate columns first; down_proj [E][ff][d];
// transformers v5 transposes them at load): read as per-expert matrices, transposed copies in the
// stored dtype (F32, F16, BF16).
Checkpoint input_first_experts_checkpoint(Checkpoint stored, const ModelConfig& c, std::vector<std::string>& notes);
// GGUF: {arch}.expert_count and expert_used_count into `count_key` and num_experts_per_tok; the
// renormalisation from {arch}.expert_weights_norm into `norm_key` (norm_default, llama.cpp's fixed
// choice, when absent); with `dense_layers`, the layers without blk.N.ffn_gate_inp in mlp_only_layers.
void gguf_experts(const GgufFile& f, const std::string& prefix, nlohmann::json& c, const char* count_key,
                  const char* norm_key, bool norm_default, bool dense_layers);
// A window on every layer when one is set (Mistral's, Phi-3's).
std::vector<bool> every_layer_windowed(Fields& f, ModelConfig& mc, int& window, ArchitectureLayers& layers);
// Qwen's: the window is off unless use_sliding_window, and covers layers i >= max_window_layers.
std::vector<bool> qwen_windows(Fields& f, const ModelConfig& mc, int& window);
// Gemma 2 and 3's block (GeGLU, (1 + w) norms, sandwich norms, scaled embeddings, soft caps);
// `period` global layers: every period-th is global, the others local.
std::vector<bool> gemma_block(Fields& f, ModelConfig& mc, int& window, bool gemma3, int period);
// Every `period`-th layer global ((i + 1) % period == 0), the others windowed.
std::vector<bool> windowed_but_every(int n_layers, int period);

// Gemma 2 and 3's GGUF keys (query_pre_attn_scalar, window, soft caps) and tensor names.
void gguf_gemma_keys(const GgufFile& f, const std::string& prefix, nlohmann::json& c, bool gemma3);
constexpr GgufPart kGemmaGgufParts[] = {
    {"ffn_norm", tensor_names::Part::PreFfnNorm},  // the MLP's input norm
    {"post_attention_norm", tensor_names::Part::FfnNorm},
    {"post_ffw_norm", tensor_names::Part::PostFfnNorm},
};
#define PERT_GEMMA_CONFIG_KEYS \
  "rms_norm_eps hidden_activation query_pre_attn_scalar attn_logit_softcapping final_logit_softcapping sliding_window layer_types"
// Qwen2's and Qwen3's: a GGUF window covers every layer.
void qwen_from_gguf(const GgufFile& f, const std::string& prefix, nlohmann::json& c);

// GGUF keys, read as gguf_model.cpp reads them (FormatError naming the file and key).
int gguf_positive(const GgufFile& f, const std::string& key, std::optional<int64_t> fallback = std::nullopt);
double gguf_positive_number(const GgufFile& f, const std::string& key, double fallback);
// {arch}.attention.sliding_window_pattern (Gemma 3, Cohere 2), as llama.cpp reads it.
void gguf_window_pattern(const GgufFile& f, const std::string& prefix, int fallback, nlohmann::json& c);
// A window on every layer, where the file gives attention.sliding_window (c["sliding_window"]).
bool gguf_window(const GgufFile& f, const std::string& prefix, nlohmann::json& c);
// attention_bias / mlp_bias from the tensors the file has.
void gguf_biases(const GgufFile& f, nlohmann::json& c, bool attention, bool mlp);

// Vision-language models (vision_language.cpp): `spec` marked as one, laid out as `layout` says;
// config.json with text_config's keys at the top level (the top level's win; unchanged for a text
// model) and the layout's text defaults where both leave a key out; the language model's tensors
// under pert's names (model.language_model.X read as model.X, ...), the vision tower's left out
// and counted in `skipped` (ConfigError when no language model is there, or two layouts are);
// language_model_named renames alone, the vision tensors kept (a checkpoint hook that needs pert's
// names runs before model_dir leaves them out); M-RoPE as the HF class computes it
// (`interleaved`: Qwen3-VL's), a config saying otherwise refused.
ArchitectureSpec vision_language(ArchitectureSpec spec, const VisionLanguageLayout& layout = kQwenVisionLanguage);
nlohmann::json language_model_config(const nlohmann::json& config, const std::string& source);
Checkpoint language_model_checkpoint(Checkpoint all, const ArchitectureSpec& spec, int& skipped);
Checkpoint language_model_named(Checkpoint all, const ArchitectureSpec& spec);
void check_mrope(Fields& f, bool interleaved);
// GGUF qwen2vl / qwen3vl: {arch}.rope.dimension_sections (llama.cpp's four, the fourth 0 for text)
// as rope_scaling's mrope_section; {arch}.n_deepstack_layers checked, which text alone leaves unused.
void gguf_mrope(const GgufFile& f, const std::string& prefix, nlohmann::json& c);

// One spec per file (the registry's entries).
extern const ArchitectureSpec kLlamaArchitecture, kMistralArchitecture, kQwen2Architecture, kQwen3Architecture,
    kPhi3Architecture, kSmolLM3Architecture, kGemma2Architecture, kGemma3Architecture, kCohere2Architecture,
    kMixtralArchitecture, kQwen2MoeArchitecture, kQwen3MoeArchitecture, kOlmoeArchitecture, kGptOssArchitecture;

extern const ArchitectureSpec kQwen2VlArchitecture, kQwen25VlArchitecture, kQwen3VlArchitecture;
extern const ArchitectureSpec kGemma3VlArchitecture;     // gemma3.cpp
extern const ArchitectureSpec kQwen3VlMoeArchitecture;   // qwen3_vl.cpp
extern const ArchitectureSpec kDeepseekV2Architecture, kDeepseekV3Architecture;  // deepseek_v3.cpp

}  // namespace pert

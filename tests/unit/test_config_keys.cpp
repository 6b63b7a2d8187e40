// Which config keys each HF architecture reads (src/model/architectures/: each one's `reads`): another one's key is
// refused or listed as ignored, never dropped; keys of architectures pert does not read that
// change the math are refused; rope_type "default" reads nothing beside it. The table in
// docs/models.md is this table.
#include <algorithm>
#include <fstream>
#include <regex>
#include <sstream>

#include "model/config_fields.hpp"
#include "pert/config.hpp"
#include "pert/error.hpp"
#include "test_util.hpp"

using namespace pert;

namespace {

const std::string kKeysSource = "keys/config.json";

json config_of(const std::string& architecture) {
  json c = tiny_config();
  c["architectures"] = {architecture};
  c["model_type"] = architecture_model_type(architecture);
  return c;
}

std::vector<std::string> words(const std::string& list) {
  std::istringstream in(list);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

bool has_word(const std::string& list, const std::string& key) {
  const std::vector<std::string> w = words(list);
  return std::find(w.begin(), w.end(), key) != w.end();
}

}  // namespace

TEST_CASE("config keys: another architecture's key is refused or listed as ignored, never dropped", "[config][keys]") {
  // Every key some architecture reads, set on each architecture that does not.
  std::vector<std::string> all;
  for (const std::string& a : architecture_names())
    for (const std::string& k : words(architecture_keys(a))) all.push_back(k);
  for (const std::string& a : architecture_names())
    for (const std::string& key : all) {
      const std::string reads = architecture_keys(a), ignores = architecture_keys(a, true);
      if (has_word(reads, key)) continue;
      json c = config_of(a);
      c[key] = 1;
      INFO(a << " " << key);
      if (has_word(ignores, key)) {
        const std::vector<std::string> ignored = ignored_config_keys(c);
        CHECK(std::find(ignored.begin(), ignored.end(), key) != ignored.end());
      } else {
        REQUIRE_THROWS_NAMING(parse_model_config(c, kKeysSource), ConfigError, kKeysSource + ": " + key + " is not read by " +
                                                                                   a);
      }
    }
  // The cases by name, and what the message says.
  json llama = config_of("LlamaForCausalLM");
  for (const char* key : {"rope_local_base_freq", "no_rope_layer_interval", "hidden_activation"}) {
    json c = llama;
    c[key] = key[0] == 'h' ? json("gelu_pytorch_tanh") : json(4);
    REQUIRE_THROWS_NAMING(parse_model_config(c, kKeysSource), ConfigError,
                          std::string(key) + " is not read by LlamaForCausalLM (", "it, and it changes what it computes there); remove it");
  }
  json c = config_of("Gemma2ForCausalLM");  // Gemma 2
  c["rope_local_base_freq"] = 100.0;
  REQUIRE_THROWS_NAMING(parse_model_config(c, kKeysSource), ConfigError,
                        "rope_local_base_freq is not read by Gemma2ForCausalLM (Gemma3ForCausalLM and Gemma3ForConditionalGeneration read it,");
  c.erase("rope_local_base_freq");
  c["sliding_window_pattern"] = 3;
  REQUIRE_THROWS_NAMING(parse_model_config(c, kKeysSource), ConfigError,
                        "sliding_window_pattern is not read by Gemma2ForCausalLM (Gemma3ForCausalLM, Cohere2ForCausalLM and Gemma3ForConditionalGeneration read it");
  c.erase("sliding_window_pattern");
  c["use_sliding_window"] = false;  // false too: Gemma 2 windows its even layers whatever it says
  REQUIRE_THROWS_NAMING(parse_model_config(c, kKeysSource), ConfigError, "use_sliding_window is not read by Gemma2ForCausalLM");
  c = config_of("MistralForCausalLM");  // Mistral
  c["max_window_layers"] = 1;
  REQUIRE_THROWS_NAMING(parse_model_config(c, kKeysSource), ConfigError, "max_window_layers is not read by MistralForCausalLM");
  c = config_of("Gemma3ForCausalLM");  // Gemma 3
  c["layer_norm_eps"] = 1e-5;
  REQUIRE_THROWS_NAMING(parse_model_config(c, kKeysSource), ConfigError, "layer_norm_eps is not read by Gemma3ForCausalLM");

  // Keys that published configs carry and HF's model ignores: listed, not refused.
  c = config_of("SmolLM3ForCausalLM");  // SmolLM3-3B's config.json has max_window_layers
  c["max_window_layers"] = 28;
  CHECK(ignored_config_keys(c) == std::vector<std::string>{"max_window_layers"});
  CHECK_NOTHROW(parse_model_config(c, kKeysSource));
  c = config_of("Gemma2ForCausalLM");  // Gemma 2's configs carry hidden_act beside hidden_activation
  c["hidden_act"] = "gelu_pytorch_tanh";
  CHECK(ignored_config_keys(c) == std::vector<std::string>{"hidden_act"});
  c = config_of("Cohere2ForCausalLM");  // Cohere 2 reads layer_norm_eps, not rms_norm_eps
  CHECK(ignored_config_keys(c) == std::vector<std::string>{"rms_norm_eps"});
  CHECK(ignored_config_keys(llama).empty());

  // `--set` (pert inspect MODEL --set KEY=V) reaches the same refusal.
  ConfigOverrides o;
  o.sets = {"rope_local_base_freq=100"};
  REQUIRE_THROWS_NAMING(parse_model_config(apply_overrides(llama, o), kKeysSource), ConfigError,
                        "rope_local_base_freq is not read by LlamaForCausalLM");
  o.sets = {"not_a_key_anywhere=1"};
  REQUIRE_THROWS_NAMING(apply_overrides(llama, o), ConfigError, "'not_a_key_anywhere' is not a config key pert reads");
}

TEST_CASE("config keys: rope_type \"default\" reads no scaling key beside it", "[config][keys]") {
  json c = tiny_config();
  c["rope_scaling"] = {{"rope_type", "default"}, {"factor", 8}};
  REQUIRE_THROWS_NAMING(parse_model_config(c, kKeysSource), ConfigError,
                        kKeysSource + ": rope_scaling.factor is set (8), but rope_type \"default\" reads no other key");
  c.erase("rope_scaling");
  c.erase("rope_theta");
  c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e6}, {"factor", 8}};
  REQUIRE_THROWS_NAMING(parse_model_config(c, kKeysSource), ConfigError, "rope_parameters.factor is set (8)");
  c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e6}, {"partial_rotary_factor", 0.5}};
  const ModelConfig m = parse_model_config(c, kKeysSource);
  CHECK(to_json(m)["position"]["base"] == 1e6);
  c.erase("rope_parameters");
  c["rope_scaling"] = {{"type", "default"}, {"factor", nullptr}};  // null: absent
  CHECK_NOTHROW(parse_model_config(c, kKeysSource));
  c["rope_scaling"] = {{"rope_type", "default"}, {"factor", 1.0}};  // a factor of 1 scales nothing
  CHECK_NOTHROW(parse_model_config(c, kKeysSource));
  c["rope_scaling"] = {{"rope_type", "default"}, {"factor", 1.5}};
  REQUIRE_THROWS_NAMING(parse_model_config(c, kKeysSource), ConfigError, "rope_scaling.factor is set (1.5)");
  c = tiny_config();
  c["position"] = {{"type", "rope"}};
  c["rope_scaling"] = {{"rope_type", "default"}, {"low_freq_factor", 1}};  // beside pert's own block too
  REQUIRE_THROWS_NAMING(parse_model_config(c, kKeysSource), ConfigError, "rope_scaling.low_freq_factor is set (1)");
}

TEST_CASE("config keys: Llama 4's chunks and temperature and Gemma 3's bidirectional mask are refused", "[config][keys]") {
  for (const auto& [key, value] : std::vector<std::pair<std::string, json>>{
           {"attention_chunk_size", 8192}, {"attn_temperature_tuning", true}, {"floor_scale", 8192}, {"attn_scale", 0.1}}) {
    json c = tiny_config();
    c[key] = value;
    REQUIRE_THROWS_NAMING(parse_model_config(c, kKeysSource), ConfigError, kKeysSource + ": " + key + " is set (",
                          "it changes the math of another architecture");
    c[key] = false;  // off
    CHECK_NOTHROW(parse_model_config(c, kKeysSource));
  }
  json c = config_of("Gemma3ForCausalLM");
  c["use_bidirectional_attention"] = true;
  REQUIRE_THROWS_NAMING(parse_model_config(c, kKeysSource), ConfigError, "use_bidirectional_attention is set (true)");
  c["use_bidirectional_attention"] = false;  // what newer Gemma 3 configs write: the causal mask
  CHECK_NOTHROW(parse_model_config(c, kKeysSource));
}

TEST_CASE("config keys: docs/models.md's table is the code's", "[config][keys]") {
  std::ifstream in(std::string(PERT_SOURCE_DIR) + "/docs/models.md");
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  auto cell_keys = [](const std::string& cell) {
    std::vector<std::string> out;
    const std::regex code("`([a-z_0-9]+)`");
    for (auto it = std::sregex_iterator(cell.begin(), cell.end(), code); it != std::sregex_iterator(); ++it)
      out.push_back((*it)[1]);
    std::sort(out.begin(), out.end());
    return out;
  };
  auto sorted = [](std::vector<std::string> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  const std::string all = text.str();
  const size_t section = all.find("### The keys each architecture reads");
  REQUIRE(section != std::string::npos);
  const std::string doc = all.substr(section);
  const size_t common = doc.find("Every architecture reads ");
  REQUIRE(common != std::string::npos);
  CHECK(cell_keys(doc.substr(common, doc.find('\n', common) - common)) == sorted(words(common_config_keys())));
  for (const std::string& a : architecture_names()) {
    const std::string row = std::string("| `") + a + "` |";
    const size_t at = doc.find(row);
    INFO(row);
    REQUIRE(at != std::string::npos);
    const std::string line = doc.substr(at + row.size(), doc.find('\n', at) - at - row.size());
    const size_t bar = line.find('|');
    CHECK(cell_keys(line.substr(0, bar)) == sorted(words(architecture_keys(a))));
    CHECK(cell_keys(line.substr(bar + 1)) == sorted(words(architecture_keys(a, true))));
  }
}

TEST_CASE("config keys: dual_chunk_attention_config's sparse_attention_config is skipped unless sparse attention is on",
          "[config][keys]") {
  json c = tiny_config();
  c["dual_chunk_attention_config"] = {{"chunk_size", 24}, {"local_size", 8},
                                      {"sparse_attention_config", {{"0", {{"1", {"vertical_and_slash", 1000, 6096, 1.0}}}}}}};
  CHECK(parse_model_config(c, kKeysSource).extend.size() == 1);
  c["dual_chunk_attention_config"]["sparse_attention_enabled"] = true;
  REQUIRE_THROWS_NAMING(parse_model_config(c, kKeysSource), ConfigError, "enables sparse attention (MInference)");
}

// The "layers" block as users meet it: the labels of its rows, its rules under their own names
// (what `--set layers.NAME...` reaches), a rule that would change nothing, and the layouts that
// ship in configs/layers/ and docs/config.md on the models they are said to fit.
#include <fstream>
#include <regex>
#include <set>

#include "cli_util.hpp"
#include "pert/config.hpp"
#include "pert/error.hpp"
#include "pert/json_util.hpp"
#include "pert/model_dir.hpp"
#include "pert/positions.hpp"

using namespace pert;

namespace {

const std::string kWhere = "dir/config.json";
const fs::path kLayouts = PERT_SOURCE_DIR "/configs/layers";

ModelConfig parse_layers_config(const json& j) { return parse_model_config(j, kWhere); }

json layered(int n_layers, json layers) {
  json c = tiny_config();
  c["num_hidden_layers"] = n_layers;
  c["layers"] = std::move(layers);
  return c;
}

}  // namespace

TEST_CASE("layers: a row's label names the windows where layers differ in them", "[layers]") {
  // Gemma 3's 5:1 with one scheme: every layer RoPE, five of six with a window
  const json gemma = {{"global", {{"every", 6}}}, {"local", {{"others", true}, {"window", 8}}}};
  CHECK(position_label(parse_layers_config(layered(6, gemma))) == "rope w8 x5 + rope x1");
  // one window on every layer (Mistral's) is the architecture's, and the label is the scheme's
  json mistral = tiny_config();
  mistral["architectures"] = {"MistralForCausalLM"};
  mistral["model_type"] = "mistral";
  mistral["sliding_window"] = 8;
  const ModelConfig m = parse_layers_config(mistral);
  REQUIRE(m.layers[1].window == 8);
  CHECK(position_label(m) == "rope");
}

TEST_CASE("layers: the resolved config keeps each rule's name, so --set layers.NAME reaches it", "[layers]") {
  const json block = {{"global", {{"every", 3}}}, {"local", {{"others", true}, {"window", 8}}}};
  const ModelConfig m = parse_layers_config(layered(6, block));
  const json resolved = to_json(m);
  CHECK(resolved["layers"] == block);
  CHECK(to_json(parse_layers_config(resolved)) == resolved);
  // the name shown is the one a --set takes
  const ModelConfig set = parse_layers_config(apply_overrides(layered(6, block), {{}, {"layers.global.window=4"}}));
  CHECK(set.layers[2].window == 4);
  CHECK(set.layers[0].window == 8);

  // Beside an architecture's own layout (Mistral's window on every layer) the rules list their
  // layers, the architecture's part is a group of its own, and the whole reads back the same.
  json c = layered(6, {{"nope", {{"every", 2}, {"position", {{"type", "none"}}}}}});
  c["architectures"] = {"MistralForCausalLM"};
  c["model_type"] = "mistral";
  c["sliding_window"] = 8;
  const ModelConfig both = parse_layers_config(c);
  const json layers = to_json(both)["layers"];
  CHECK(layers["nope"] == json({{"layers", {1, 3, 5}}, {"position", {{"type", "none"}}}}));
  CHECK(layers["layers_from_0"] == json({{"layers", {0, 1, 2, 3, 4, 5}}, {"window", 8}}));
  CHECK(layers.size() == 2);
  CHECK(to_json(parse_layers_config(to_json(both))) == to_json(both));

  // A rule given the name of the architecture's group keeps it; the group takes another.
  c["layers"] = {{"layers_from_0", {{"every", 2}, {"position", {{"type", "none"}}}}}};
  const ModelConfig named = parse_layers_config(c);
  const json named_layers = to_json(named)["layers"];
  CHECK(named_layers["layers_from_0"] == json({{"layers", {1, 3, 5}}, {"position", {{"type", "none"}}}}));
  CHECK(named_layers["layers_from_0_"] == json({{"layers", {0, 1, 2, 3, 4, 5}}, {"window", 8}}));
  const ModelConfig again = parse_layers_config(to_json(named));
  for (int l = 0; l < 6; ++l) {
    CHECK(again.layers[size_t(l)].window == named.layers[size_t(l)].window);
    CHECK(again.layers[size_t(l)].position.scheme->to_json() == named.layers[size_t(l)].position.scheme->to_json());
  }
}

TEST_CASE("layers: a rule that would change nothing is refused, naming it", "[layers]") {
  // `--set layers.global.every=4` on a model without a block: a rule that selects and sets nothing
  json rope = tiny_config();
  rope["num_hidden_layers"] = 8;
  REQUIRE_THROWS_NAMING(parse_layers_config(apply_overrides(rope, {{}, {"layers.global.every=4"}})), ConfigError, kWhere,
                        "layers.global sets none of \"position\", \"window\", \"chunk\", \"temperature\", and no rule "
                        "with \"others\": true takes the layers it leaves: it would change nothing");
  REQUIRE_THROWS_NAMING(parse_layers_config(layered(4, {{"all", {{"others", true}}}})), ConfigError, kWhere,
                        "layers.all sets none of", "it would change nothing");
  REQUIRE_THROWS_NAMING(parse_layers_config(layered(4, {{"g", {{"every", 2}}}, {"o", {{"others", true}}}})), ConfigError,
                        kWhere, "nor does layers.o, which takes the layers it leaves");
  // it keeps its layers from an "others" rule that sets something: Gemma 3's global layers
  CHECK(parse_layers_config(layered(4, {{"g", {{"every", 2}}}, {"o", {{"others", true}, {"window", 4}}}})).layers[1].window == 0);
}

TEST_CASE("layers: every layout of configs/layers loads on the models configs/README.md says it fits", "[layers]") {
  // The family's models, one per scheme (five layers, L = 128; --allow-scheme-change where a layer's
  // scheme changes). (The hybrid members have a block of their own, which a file's rules merge with.)
  const std::vector<std::string> family = {"none", "learned", "sinusoidal", "rope", "alibi", "xpos",
                                           "t5", "xl", "deberta", "kerple", "fire", "cope", "fox", "stick_breaking"};
  const std::set<std::string> for_family = {"nope-every-4th.json", "rnope-swa.json", "irope.json", "local-global.json"};
  std::set<std::string> files;
  for (const auto& e : fs::directory_iterator(kLayouts)) files.insert(e.path().filename().string());
  std::set<std::string> said = for_family;
  said.insert("gemma3-5to1.json");
  CHECK(files == said);  // a new layout says which models it fits, here and in configs/README.md
  for (const std::string& file : for_family)
    for (const std::string& model : family) {
      INFO(file << " on models/" << model);
      ConfigOverrides o;
      o.files = {kLayouts / file};
      o.allow_scheme_change = true;
      CHECK_NOTHROW(open_model_dir(PERT_SOURCE_DIR "/models/" + model, o));
    }
  // gemma3-5to1.json (every 6th layer global) fits six layers or a multiple, the stories15M
  // shape of docs/speed.md and stories110M's 12; on the family's five it is refused, naming it.
  ConfigOverrides gemma;
  gemma.files = {kLayouts / "gemma3-5to1.json"};
  const json rope = read_json_file(PERT_SOURCE_DIR "/models/rope/config.json");
  for (int n : {6, 12}) {
    json c = rope;
    c["num_hidden_layers"] = n;
    const ModelConfig m = parse_model_config(apply_overrides(c, gemma), "stories shape");
    for (int i = 0; i < n; ++i) CHECK(m.layers[size_t(i)].window == (i % 6 == 5 ? 0 : 1024));
  }
  REQUIRE_THROWS_NAMING(open_model_dir(PERT_SOURCE_DIR "/models/rope", gemma), ConfigError,
                        "layers.global.every must be at most 5, got 6");
}

TEST_CASE("layers: docs/config.md's Gemma 3 example is Gemma 3 4B's layout", "[layers]") {
  std::ifstream in(PERT_SOURCE_DIR "/docs/config.md");
  const std::string doc((std::istreambuf_iterator<char>(in)), {});
  std::smatch block;
  const std::regex example("```json\n(\"position\"[^`]*\"every\": 6[^`]*)```");
  REQUIRE(std::regex_search(doc, block, example));
  json c = json::parse("{" + block[1].str() + "}");
  // Gemma 3 4B: 34 layers, every 6th global (layers 5, 11, ...), the others a window of 1024
  c.update(tiny_config(), true);
  c["num_hidden_layers"] = 34;
  c.erase("rope_theta");
  const ModelConfig m = parse_layers_config(c);
  for (int i = 0; i < 34; ++i) CHECK(m.layers[size_t(i)].window == (i % 6 == 5 ? 0 : 1024));
  CHECK(position_label(m) == "rope w1024 x29 + rope linear x8 x5");  // the local layers' own RoPE, base 10000
}

TEST_CASE("layers: pert inspect shows a layout's rules by the names --set takes", "[layers][cli]") {
  const Run r = run_pert({"inspect", kRope, "--config", (kLayouts / "local-global.json").string()});
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("\"global\": {") != std::string::npos);
  CHECK(r.out.find("\"local\": {") != std::string::npos);
  CHECK(r.out.find("layers_from_") == std::string::npos);
}

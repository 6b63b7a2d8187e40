// The library's grid (pert/grid.hpp, grid_shards.hpp): shards, resume, merge and status, with a
// measure that counts its runs instead of running the model (the CLI's grids: test_cli.cpp,
// test_attention_cli.cpp, test_passkey_cli.cpp).
#include <catch2/catch.hpp>

#include "cli_util.hpp"
#include "pert/error.hpp"
#include "pert/grid.hpp"
#include "pert/grid_file.hpp"
#include "pert/grid_shards.hpp"

using nlohmann::json;

namespace {

// A "perplexity" of 1 per cell, each run counted.
class CountingMeasure : public pert::Measure {
 public:
  explicit CountingMeasure(const std::string& text) { spec_.text_file = text; }
  const char* name() const override { return "perplexity"; }
  const pert::EvalSpec& spec() const override { return spec_; }
  json settings(const json&, const std::string&) override { return spec_.settings(); }
  json run(const pert::Model&, const std::vector<int>&, int, int, pert::CacheType, const std::string&, bool) const override {
    ++runs;
    return {{"ppl", 1.0}, {"ppl_stderr", 0.0}, {"nll", 0.0}, {"tokens", 1}, {"windows", 1}, {"seconds", 0.0},
            {"tokens_per_second", 1.0}};
  }
  std::string summary(const json&) const override { return "ok"; }
  std::string table(const json& cells) const override { return pert::markdown_table(cells); }
  std::string csv(const json& sweep) const override { return pert::csv_text(sweep); }
  mutable int runs = 0;

 private:
  pert::EvalSpec spec_;
};

pert::GridRequest request(const fs::path& out, const std::vector<int>& lengths, const std::string& shard = "") {
  pert::GridRequest r;
  r.models = {kRope};
  r.lengths = lengths;
  r.out = out.string();
  r.shard = shard;
  r.quiet = true;
  return r;
}

std::vector<int> indices(const json& sweep) {
  std::vector<int> out;
  for (const json& c : sweep["cells"]) out.push_back(c["index"]);
  return out;
}

}  // namespace

TEST_CASE("grid: K/N parses as 1 <= K <= N, the missing cells are named six at most", "[grid]") {
  CHECK(pert::parse_shard("2/3") == std::pair{2, 3});
  for (const char* bad : {"0/3", "4/3", "1/0", "1/2/3", "a/b", "1/2x", ""}) CHECK(pert::parse_shard(bad).second == 0);
  CHECK(pert::missing_cells_text({"a"}) == "1 cell missing: a");
  CHECK(pert::missing_cells_text({"a", "b", "c", "d", "e", "f", "g", "h"}) ==
        "8 cells missing: a, b, c, d, e, f, and 2 more");
  CHECK(pert::settings_difference({{"a", 1}, {"b", 2}}, {{"a", 1}, {"b", 2}}).empty());
  CHECK(pert::settings_difference({{"a", 1}}, {{"a", 1}, {"b", 2}}) == "b = null, not 2");
  CHECK_THROWS_WITH(pert::check_whole("sweep", {"x @2"}, "", false),
                    "sweep --merge: the grid is not whole, 1 cell missing: x @2; --partial merges what there is");
  CHECK_NOTHROW(pert::check_whole("sweep", {"x @2"}, "", true));
  json report;
  pert::add_shard(report, "1/2");
  pert::add_shard(report, "1/2");
  pert::add_shard(report, "2/2");
  CHECK(report["shards"] == json({"1/2", "2/2"}));
}

TEST_CASE("grid: shards run their own cells, resume, and merge only whole grids of one setting", "[grid]") {
  TempDir dir;
  CountingMeasure measure(repeated_story(dir, 2).string());
  // Shard 1/2 of three lengths: indices 0 and 2; a rerun runs nothing again.
  const json one = pert::run_grid(request(dir / "a.json", {16, 32, 64}, "1/2"), measure);
  CHECK(indices(one) == std::vector<int>{0, 2});
  CHECK(measure.runs == 2);
  pert::run_grid(request(dir / "a.json", {16, 32, 64}, "1/2"), measure);
  CHECK(measure.runs == 2);
  CHECK(fs::exists(dir / "a.csv"));

  // The merge refuses while shard 2/2's cell is missing, naming it; --partial merges what there is.
  pert::GridRequest merge = request(dir / "merged.json", {});
  CHECK_THROWS_WITH(pert::merge_grid({(dir / "a.json").string()}, merge, measure),
                    Catch::Contains("1 cell missing: rope plain @32"));
  merge.partial = true;
  CHECK(indices(pert::merge_grid({(dir / "a.json").string()}, merge, measure)) == std::vector<int>{0, 2});
  fs::remove(dir / "merged.json");
  merge.partial = false;

  pert::run_grid(request(dir / "b.json", {16, 32, 64}, "2/2"), measure);
  CHECK(measure.runs == 3);
  const json merged = pert::merge_grid({(dir / "a.json").string(), (dir / "b.json").string()}, merge, measure);
  CHECK(indices(merged) == std::vector<int>{0, 1, 2});
  CHECK(merged["shards"] == json({"1/2", "2/2"}));

  const json status = pert::grid_status({(dir / "a.json").string(), (dir / "b.json").string()}, measure);
  CHECK(status["grid"] == 3);
  CHECK(status["done"] == 3);
  CHECK(status["missing"] == 0);

  // A shard of another grid's settings (another text) is refused, naming the file.
  write_file(dir / "other.txt", std::string("Another text altogether, for another grid.\n"));
  CountingMeasure other(dir / "other.txt");
  pert::run_grid(request(dir / "c.json", {16, 32, 64}, "2/2"), other);
  fs::remove(dir / "merged.json");
  CHECK_THROWS_WITH(pert::merge_grid({(dir / "a.json").string(), (dir / "c.json").string()}, merge, measure),
                    Catch::Contains("c.json: made with another text"));
  // ... and a file of another measure.
  json attention = pert::read_sweep(dir / "a.json");
  attention["settings"]["measure"] = "attention";
  attention["cells"] = json::array();
  write_file(dir / "attention.json", attention.dump());
  CHECK_THROWS_WITH(pert::read_grid_file((dir / "attention.json").string(), measure),
                    Catch::Contains("a pert file of attention cells, not perplexity"));
}

TEST_CASE("grid: passkey-style shards resume their file and merge in grid order", "[grid]") {
  TempDir dir;
  const pert::GridOf grid_of = [](const json& result) {
    pert::GridCells grid{{}, [](const json& c) { return std::to_string(c["length"].get<int>()); }};
    for (const json& n : result["lengths"]) grid.names.push_back(std::to_string(n.get<int>()));
    return grid;
  };
  const json head = {{"model_dir", kRope}, {"position", "rope"}, {"trials", 1}, {"seed", 1}, {"trained_length", 128},
                     {"lengths", {16, 32, 64}}, {"depths", {0.5}}};
  auto cell = [](int n) { return json{{"length", n}, {"trials", 1}, {"depth", 0.5}, {"accuracy", 1.0}, {"correct", 1}}; };
  const std::string a = (dir / "a.json").string(), b = (dir / "b.json").string();
  {
    auto shard = pert::open_shard("1/2", a, head, kRope, grid_of, "passkey");
    CHECK(shard->wanted(0));
    CHECK_FALSE(shard->wanted(1));
    shard->add(cell(16));
  }
  auto resumed = pert::open_shard("1/2", a, head, kRope, grid_of, "passkey");
  CHECK_FALSE(resumed->wanted(0));  // in the file already
  CHECK(resumed->wanted(2));
  resumed->add(cell(64));
  CHECK_THROWS_WITH(pert::merge_shard_files({a}, grid_of, false, "passkey"),
                    "passkey --merge: the grid is not whole, 1 cell missing: 32; --partial merges what there is");
  pert::open_shard("2/2", b, head, kRope, grid_of, "passkey")->add(cell(32));
  const json merged = pert::merge_shard_files({b, a}, grid_of, false, "passkey");
  REQUIRE(merged["cells"].size() == 3);
  CHECK(merged["cells"][0]["length"] == 16);
  CHECK(merged["cells"][2]["length"] == 64);

  json other = head;
  other["seed"] = 2;
  pert::open_shard("2/2", (dir / "c.json").string(), other, kRope, grid_of, "passkey")->add(cell(32));
  CHECK_THROWS_WITH(pert::merge_shard_files({a, (dir / "c.json").string()}, grid_of, false, "passkey"),
                    Catch::Contains("c.json: made with seed = 2, not 1"));
}

TEST_CASE("grid: a config that does not fit a model stops the grid before its first cell", "[grid]") {
  TempDir dir;
  CountingMeasure measure(repeated_story(dir, 2).string());
  pert::GridRequest r = request(dir / "a.json", {16, 32, 64});
  // gemma3-5to1's every 6th layer global needs six layers; the family's models have five. The
  // plain row's cells come first in the grid and must not run before the refusal.
  r.configs = {"plain", PERT_SOURCE_DIR "/configs/layers/gemma3-5to1.json"};
  CHECK_THROWS_WITH(pert::run_grid(r, measure),
                    Catch::Contains("sweep: `config` " PERT_SOURCE_DIR "/configs/layers/gemma3-5to1.json on " + kRope + ": ") &&
                        Catch::Contains("layers.global.every must be at most 5, got 6"));
  CHECK(measure.runs == 0);
  CHECK_FALSE(fs::exists(dir / "a.json"));
  // A model without a tokenizer is refused up front too.
  const fs::path bare = dir / "bare";
  fs::create_directory(bare);
  for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(fs::path(kRope) / f, bare / f);
  r.configs = {};
  r.models = {kRope, bare.string()};
  CHECK_THROWS_WITH(pert::run_grid(r, measure), Catch::StartsWith((bare / "tokenizer.json").string()));
  CHECK(measure.runs == 0);
}

TEST_CASE("grid: cells refused as a scheme change run again under allow_scheme_change, into the same file", "[grid]") {
  TempDir dir;
  CountingMeasure measure(repeated_story(dir, 2).string());
  pert::GridRequest r = request(dir / "a.json", {16, 32});
  r.configs = {"plain", PERT_SOURCE_DIR "/configs/layers/rnope-swa.json"};  // layer 3 NoPE on a RoPE model
  pert::GridOutcome outcome;
  json sweep = pert::run_grid(r, measure, &outcome);
  CHECK(measure.runs == 2);
  CHECK((outcome.cells == 4 && outcome.failed == 2));
  REQUIRE(sweep["cells"].size() == 4);
  CHECK(pert::scheme_refused(sweep["cells"][2]));
  CHECK_FALSE(pert::scheme_refused(sweep["cells"][0]));
  pert::run_grid(r, measure, &outcome);  // resumed as it was: nothing runs, the refused cells stay
  CHECK(measure.runs == 2);
  r.overrides.allow_scheme_change = true;
  sweep = pert::run_grid(r, measure, &outcome);
  CHECK(measure.runs == 4);  // only the two refused cells
  CHECK((outcome.cells == 4 && outcome.failed == 0));
  REQUIRE(sweep["cells"].size() == 4);
  for (const json& c : sweep["cells"]) CHECK(c.contains("ppl"));
  CHECK(sweep["cells"][2]["position_label"] == "rope w64 x4 + none x1");
  CHECK(sweep["settings"]["allow_scheme_change"] == true);
  r.overrides.allow_scheme_change = false;  // and resumed without it: nothing to run, the file as it is
  pert::run_grid(r, measure, &outcome);
  CHECK(measure.runs == 4);
  CHECK(pert::read_sweep(dir / "a.json")["settings"]["allow_scheme_change"] == true);

  // A grid whose every cell is refused: all of them failed.
  pert::GridRequest refused = request(dir / "b.json", {16});
  refused.configs = {PERT_SOURCE_DIR "/configs/layers/rnope-swa.json"};
  pert::run_grid(refused, measure, &outcome);
  CHECK((outcome.cells == 1 && outcome.failed == 1));
}

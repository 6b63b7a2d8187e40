// A grid: a measure of every (model, config, length) cell, written to a results file (its format:
// grid_file.hpp) after every cell. Resumable (cells already in the file are skipped), shardable
// (shard K/N runs the cells whose index % N == K - 1, for a Slurm array) and mergeable (the
// shards' files joined, refused while a cell of the grid is missing). `pert sweep` (perplexity)
// and `pert attention` are its CLI front ends, pert.sweep and pert.merge its Python ones.
// Passkey's and ruler's grids (grid_shards.hpp) share its shards, lock and merge rules.
#pragma once
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "pert/config.hpp"
#include "pert/evaluation.hpp"
#include "pert/cache_type.hpp"
#include "pert/loaded_model.hpp"
#include "pert/model.hpp"
#include "pert/output_file.hpp"
#include "pert/tokenizer.hpp"

namespace pert {

// K/N, or {0, 0} when `s` is not that (1 <= K <= N).
std::pair<int, int> parse_shard(const std::string& s);
// A result file's "shards" (the K/N of each run that wrote it) with `shard` added unless there.
void add_shard(nlohmann::json& report, const nlohmann::json& shard);

// The lock of a results file that several runs may write (shards of one grid given one file, a
// rerun beside the first): writers take turns re-reading and adding to it. Where the filesystem
// has no locks, a warning (once) that writers must not share the file.
FileLock results_lock(const std::string& path);

// The first setting in which `have` and `want` differ (a key either lacks reads as null), as
// "KEY = HAVE, not WANT"; "" when they agree.
std::string settings_difference(const nlohmann::json& have, const nlohmann::json& want);

// "3 cells missing: a, b, c" (the first six named), for a merge's refusal and a status.
std::string missing_cells_text(const std::vector<std::string>& missing);
// A merge's grid with `missing` cells: Error "COMMAND --merge: the grid is not whole, ..." (with
// `hint` after the names), or with `partial` that as a warning on stderr. Nothing when none is.
void check_whole(const std::string& command, const std::vector<std::string>& missing, const std::string& hint,
                 bool partial);

// What one cell computes and how cells read as a table and a CSV (the CLI adds its flags).
class Measure {
 public:
  virtual ~Measure() = default;
  virtual const char* name() const = 0;      // a file's settings.measure: "perplexity", "attention"
  virtual const EvalSpec& spec() const = 0;  // the text, its windows and its tokens
  // What every cell's result depends on besides model, config and length (the text's hash and
  // the model settings are added by the grid); `file`: the settings of the results file `out`
  // as found (null: none).
  virtual nlohmann::json settings(const nlohmann::json& file, const std::string& out) = 0;
  // One cell's result fields; pert::Error for a cell that cannot run (then an "error" cell).
  virtual nlohmann::json run(const Model& model, const std::vector<int>& tokens, int length, int bos, CacheType cache,
                             const std::string& label, bool quiet) const = 0;
  virtual std::string summary(const nlohmann::json& cell) const = 0;  // the cell's line on stderr
  virtual std::string table(const nlohmann::json& cells) const = 0;   // Markdown
  virtual std::string csv(const nlohmann::json& sweep) const = 0;
};

// A grid run into a results file, as `pert sweep` and `pert attention` ask for it (messages name
// their flags: --out, --label, --config).
struct GridRequest {
  std::string command = "sweep";  // "sweep", "attention": for messages
  std::vector<std::string> models;
  std::vector<std::string> configs;  // config files, or kPlain (grid_file.hpp); none: {kPlain}
  std::vector<std::string> labels;   // one per config (none: each file's name)
  std::vector<int> lengths;
  std::string out;    // the results file; its cells are skipped
  std::string csv;    // the CSV beside it ("": `out` with .csv)
  std::string shard;  // "K/N" ("": the whole grid)
  ConfigOverrides overrides;  // --set and --allow-scheme-change for every cell (no files)
  std::string dtype = "auto", cache_type = "f32";
  bool partial = false;  // a merge of a grid with cells missing: a warning, not an error
  bool quiet = false;
  // How a cell's model is loaded (the CLI prints the load's note) and how a library message is
  // worded for the front end's user (the CLI names flags for fields).
  std::function<LoadedModel(const std::string& model, const ConfigOverrides& overrides, WeightType type)> load;
  std::function<std::string(const std::string& message)> words;
  // The text's tokens for a loaded model's tokenizer and BOS (null: the measure's spec reads its
  // text file; pert.sweep's text= and tokens= give their own).
  std::function<std::vector<int>(const Tokenizer& tokenizer, int bos)> tokens;
};

// One cell of a grid as it runs: its place, its model, config (kPlain, a file or inline JSON) and
// length, and the label and hashes its record carries.
struct GridCell {
  int index = 0;
  std::string model, config, label, config_hash, model_hash;
  int length = 0;
};

// Runs `cells` in order, each (model, config) loaded once, and hands each cell's record to `made`
// (with the count run so far, of `todo`, and its name "MODEL LABEL @LENGTH"): what a results
// file's cell holds, "error" where it could not run (a config that would replace the trained
// scheme, a length past a learned table, a text too short). Every (model, config) and each
// model's tokenizer is opened before the first cell: one that does not load (a layout that does
// not fit the model, a missing file) stops the run there, naming the config and the model; any
// other error stops it where it happens.
// `skip` (may be null) is asked before each cell, so cells that other writers made meanwhile
// are left. The one loop of `pert sweep`, `pert attention` and pert.sweep.
void run_cells(const std::vector<GridCell>& cells, const GridRequest& request, const Measure& measure,
               const std::function<bool(const GridCell&)>& skip,
               const std::function<void(nlohmann::json& cell, int ran, int todo, const std::string& name)>& made);

// `pert sweep`'s measure and pert.sweep's: each cell's perplexity (evaluation.hpp) of `spec`'s
// text, kept by reference (a front end's flags fill it in after this is made). `buckets_given`
// (null: given) says whether the user chose the buckets; when not, a resumed file keeps its own.
class PerplexityMeasure : public Measure {
 public:
  PerplexityMeasure(EvalSpec& spec, std::function<bool()> buckets_given) : spec_(spec), buckets_given_(std::move(buckets_given)) {}
  const char* name() const override { return "perplexity"; }
  const EvalSpec& spec() const override { return spec_; }
  nlohmann::json settings(const nlohmann::json& file, const std::string& out) override;
  nlohmann::json run(const Model& model, const std::vector<int>& tokens, int length, int bos, CacheType cache,
                     const std::string& label, bool quiet) const override;
  std::string summary(const nlohmann::json& cell) const override;
  std::string table(const nlohmann::json& cells) const override;
  std::string csv(const nlohmann::json& sweep) const override;

 private:
  EvalSpec& spec_;
  std::function<bool()> buckets_given_;
  mutable KeyEvaluator key_evaluator_;  // the spec's key_model, loaded for the first cell
};

// The CSV beside the JSON: `csv`, or `out` with .csv.
std::string grid_csv_path(const GridRequest& request);

// Of a run's cells (its shard's), how many `out` holds at the end and how many of those are
// error cells: all of them failed when the two are equal and not 0.
struct GridOutcome {
  int cells = 0, failed = 0;
};
// Runs the request's cells (its shard's; those in `out` skipped, but for cells refused as a
// change of scheme when the request allows one), saving `out` and its CSV under the results
// lock after every cell; returns the file as last written, and with `outcome` what it holds of
// the run's cells.
nlohmann::json run_grid(const GridRequest& request, Measure& measure, GridOutcome* outcome = nullptr);

// `parts`' cells added to `out`'s (an existing `out` keeps its own), written to `out` and its
// CSV; returns them. Refuses a part of other settings, measure or weights, and (unless
// `partial`) a grid with cells missing, naming them.
nlohmann::json merge_grid(const std::vector<std::string>& parts, const GridRequest& request, Measure& measure);

// Each file's share of its grid done, failed (cells that could not run) and missing, then the
// whole grid's: {"files": [...], "grid", "done", "failed", "missing", "missing_cells"}.
nlohmann::json grid_status(const std::vector<std::string>& files, const Measure& measure);
std::string grid_status_table(const nlohmann::json& status);  // Markdown, then the whole grid's line

// A results file of `measure`'s cells, read and checked (FormatError naming the file).
nlohmann::json read_grid_file(const std::string& file, const Measure& measure);

// A cell's place in a grid of models x configs x lengths: model-major, then config, then length.
struct GridPlace {
  int index;
  size_t model, config, length;  // positions in the lists
};
// The places of shard `shard` ("K/N"; "": every cell), in order.
std::vector<GridPlace> grid_places(size_t models, size_t configs, size_t lengths, const std::string& shard);

// The Python module's grids (pert.sweep, pert.merge) live in records, not a file: each record
// carries its cell's index, the grid's size ("cells") and the grid's identity ("grid").
//
// The identity, 16 hex digits, of what the cells depend on, as a file's checks compare it: each
// model by its real path and weights (model_hash), each config by its content (`configs`: a
// file's path, a merge patch as JSON, or null for none), the labels and lengths, and `settings`
// with the text file `text_file` ("" for none) by its content.
std::string grid_identity(const std::vector<std::string>& models, const nlohmann::json& configs,
                          const std::vector<std::string>& labels, const std::vector<int>& lengths,
                          const nlohmann::json& settings, const std::string& text_file);

// A record as a merge reads it: where it is ("part 2, record 5"), its index, its grid's size
// and identity (-1 and "" where it has none).
struct GridRecord {
  std::string where;
  long long index = -1, cells = -1;
  std::string grid;
};
// The records a merge keeps (positions in `records`, in grid order; of two with one index, the
// first). Error for a record that is not a grid's, records of different grids, and unless
// `partial`, a grid with cells missing (the first eight indices named).
std::vector<size_t> merge_grid_records(const std::vector<GridRecord>& records, bool partial);

}  // namespace pert

// The task bindings: perplexity, attention statistics, pass-key, ruler and the distance profile, each as its `pert`
// command's --json reports it, over the same library calls.
#include <algorithm>
#include <string>
#include <vector>

#include "pert/attention_report.hpp"
#include "pert/error.hpp"
#include "pert/evaluation.hpp"
#include "pert/json_util.hpp"
#include "pert/passkey.hpp"
#include "pert/positions.hpp"
#include "pert/ruler.hpp"
#include "python/bindings.hpp"

namespace pert::python {

namespace {

// buckets=: "log" or a count, read as the library reads a sweep's settings (True is not a count;
// anything else is shown as Python prints it).
int buckets_argument(const py::object& value) {
  nlohmann::json v = text_arg(py::str(value), "buckets");
  if (py::isinstance<py::int_>(value) && !py::isinstance<py::bool_>(value)) {
    int overflow = 0;
    const long long n = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
    if (!overflow) v = n;
  }
  return buckets_from_json(v, "`buckets`");
}

// A report (a task's --json) as a dict, its model_dir as Model.dir gives it: JSON holds a name's
// undecodable bytes as U+FFFD, which would name no directory.
py::object report_python(const nlohmann::json& report, const PyModel& self) {
  py::object out = to_python(report);
  out["model_dir"] = path_str(self.m->dir.string());
  return out;
}

}  // namespace

EvalSpec eval_spec(const py::object& mode, int stride, int chunks, const py::object& buckets, bool split_docs) {
  EvalSpec spec;
  spec.mode = text_arg(mode, "mode");
  spec.stride = stride;
  spec.max_windows = chunks;
  spec.buckets = buckets_argument(buckets);
  spec.split_docs = split_docs;
  spec.validate();  // by field; python_words names the keywords
  return spec;
}

void key_spec(EvalSpec& spec, bool key_tokens, int key_short, int key_step, double key_alpha, double key_beta,
              const py::object& key_model, const py::object& key_config) {
  spec.key_tokens = key_tokens;
  spec.key_short = key_short;
  spec.key_step = key_step;
  spec.key_alpha = key_alpha;
  spec.key_beta = key_beta;
  spec.key_model = key_model.is_none() ? "" : grid_path(key_model, "key_model");
  spec.key_config.clear();
  if (!key_config.is_none()) {  // one config or a list of them, each a file or a dict (inline JSON)
    const bool many = py::isinstance<py::list>(key_config) || py::isinstance<py::tuple>(key_config);
    const py::sequence configs = many ? py::cast<py::sequence>(key_config) : py::sequence(py::make_tuple(key_config));
    for (const py::handle c : configs)
      spec.key_config.push_back(py::isinstance<py::dict>(c) ? to_json(py::reinterpret_borrow<py::object>(c), "key_config").dump()
                                                            : grid_path(py::reinterpret_borrow<py::object>(c), "key_config"));
  }
  spec.validate();
}

// The tokens of a text given as exactly one of a string, a file or token ids, as `spec`'s mode
// reads it (`call`: the task, for messages); the tokenizer's dropped characters warned about.
std::vector<int> task_tokens(const PyModel& self, EvalSpec& spec, int bos, py::object text, py::object file,
                             py::object tokens, const std::string& call) {
  require(int(!text.is_none()) + int(!file.is_none()) + int(!tokens.is_none()) == 1,
          call + ": give exactly one of text=, file= or tokens=");
  std::vector<int> ids;
  if (!tokens.is_none()) ids = token_ids(tokens, self.config().vocab_size, call + ": tokens");
  const std::string text_str = text.is_none() ? "" : text_arg(text, "text");
  if (!file.is_none()) spec.text_file = path_arg(file, "file");
  const size_t dropped = self.m->tokenizer.dropped_characters();
  {
    const PythonSignals signals;
    py::gil_scoped_release release;
    if (!file.is_none()) ids = spec.tokenize(self.m->tokenizer, bos);
    else if (!text.is_none()) ids = spec.tokenize_text(self.m->tokenizer, bos, text_str);
  }
  warn_dropped(self.m->tokenizer, dropped, file.is_none() ? "text" : spec.text_file);
  return ids;
}

// perplexity of a text (a string, a file, or token ids) at one context length, as `pert
// perplexity --json` reports it.
py::object perplexity(const PyModel& self, py::object text, py::object file, py::object tokens, int n_ctx,
                      const py::object& mode, int stride, int chunks, const py::object& buckets, bool split_docs,
                      const py::object& cache_type, py::object progress, bool key_tokens, int key_short, int key_step,
                      double key_alpha, double key_beta, const py::object& key_model, const py::object& key_config) {
  const ModelConfig& c = self.config();
  EvalSpec spec = eval_spec(mode, stride, chunks, buckets, split_docs);
  key_spec(spec, key_tokens, key_short, key_step, key_alpha, key_beta, key_model, key_config);
  require(n_ctx >= 0, "n_ctx: must be >= 0 (0: the trained length), got " + std::to_string(n_ctx));
  const int bos = spec.bos(self.m->tokenizer, c.bos_token_id);
  PerplexityOptions o = spec.options(n_ctx > 0 ? n_ctx : c.max_position_embeddings, bos);
  const std::string cache_name = text_arg(cache_type, "cache_type");
  o.cache_type = parse_cache_type(cache_name);
  const std::vector<int> ids = task_tokens(self, spec, bos, text, file, tokens, "perplexity");
  KeyEvaluator key_evaluator;  // key_model=
  o.key.evaluator = key_evaluator.get(spec, ids, bos);
  PerplexityResult r;
  {
    const PythonSignals signals;
    py::gil_scoped_release release;
    ProgressOut out(progress, "perplexity", "positions");  // the bar by positions, the callback by windows
    r = evaluate_perplexity(*self.m->model, ids, o, [&](const PerplexityStep& step) {
      out.bar(step.positions, step.total_positions, step.windows_text());
      if (step.window_end) out.call(step.windows, step.total_windows, step.running_ppl);
    });
    out.finish();
  }
  return report_python(perplexity_report(self.m->dir.string(), c, spec, o, ids.size(), self.dtype, cache_name, r), self);
}

// The statistics of the attention weights over a text's windows, as `pert attention` computes
// them: per query range a dict of numpy arrays, [layers, heads] per statistic and [layers,
// heads, buckets] for the mass by distance.
py::object attention(const PyModel& self, py::object text, py::object file, py::object tokens, int n_ctx, int chunks,
                     int sink, bool split_docs, const py::object& cache_type, py::object progress) {
  const ModelConfig& c = self.config();
  require(n_ctx >= 0, "n_ctx: must be >= 0 (0: the trained length), got " + std::to_string(n_ctx));
  require(chunks >= 0, "chunks: must be >= 0 (0: every window that fits), got " + std::to_string(chunks));
  require(sink >= 0, "sink: must be >= 0, got " + std::to_string(sink));
  EvalSpec spec;  // chunks mode: the windows perplexity's default runs
  spec.split_docs = split_docs;
  const std::vector<int> ids = task_tokens(self, spec, c.bos_token_id, text, file, tokens, "attention");
  AttentionOptions o;
  o.n_ctx = n_ctx > 0 ? n_ctx : c.max_position_embeddings;
  o.max_windows = chunks;
  o.bos = c.bos_token_id;
  o.sink = sink;
  o.cache_type = cache_arg(cache_type);
  AttentionResult r;
  {
    const PythonSignals signals;
    py::gil_scoped_release release;
    ProgressOut out(progress, "attention", "positions");
    r = evaluate_attention(*self.m->model, ids, o, [&](const PerplexityStep& step) {
      out.bar(step.positions, step.total_positions, step.windows_text());
      if (step.window_end) out.call(step.windows, step.total_windows);
    });
    out.finish();
  }
  auto array = [](const std::vector<double>& v, const AttentionMeans& m, int inner) {
    std::vector<py::ssize_t> shape{m.layers, m.heads};
    if (inner) shape.push_back(inner);
    py::array_t<double> a(shape);
    std::copy(v.begin(), v.end(), a.mutable_data());
    return a;
  };
  py::dict out, queries;
  out["model_dir"] = path_str(self.m->dir.string());
  out["position"] = describe_position(c);
  out["n_ctx"] = o.n_ctx;
  out["windows"] = r.windows;
  out["trained_length"] = r.trained_length;
  out["sink"] = r.sink;
  out["seconds"] = r.seconds;
  py::array_t<int> buckets(std::vector<py::ssize_t>{py::ssize_t(r.buckets.size()), 2});
  for (size_t k = 0; k < r.buckets.size(); ++k) *buckets.mutable_data(k, 0) = r.buckets[k].first, *buckets.mutable_data(k, 1) = r.buckets[k].second;
  out["buckets"] = buckets;
  for (QueryRange q : {QueryRange::All, QueryRange::InL, QueryRange::PastL}) queries[query_range_name(q)] = r.range(q).queries;
  for (QueryRange q : r.reported_ranges()) {  // as the JSON: "all" alone within L
    const AttentionMeans& m = r.range(q);
    py::dict stats;
    stats["entropy"] = array(m.entropy, m, 0);
    stats["sink_mass"] = array(m.sink_mass, m, 0);
    if (!m.sink_logit_mass.empty()) stats["sink_logit_mass"] = array(m.sink_logit_mass, m, 0);  // (learned sink logits)
    stats["mean_distance"] = array(m.mean_distance, m, 0);
    stats["max_weight"] = array(m.max_weight, m, 0);
    stats["mass"] = array(m.mass, m, m.buckets);
    out[query_range_name(q)] = stats;
  }
  out["queries"] = queries;
  return std::move(out);
}

// Pass-key retrieval, as `pert passkey --json` reports it.
py::object passkey(const PyModel& self, std::vector<int> lengths, std::vector<double> depths, int trials,
                   long long seed, const py::object& cache_type, const py::object& progress) {
  PasskeySettings s;
  s.lengths = std::move(lengths);
  s.depths = std::move(depths);
  s.trials = trials;
  s.seed = seed;
  s.cache_type = cache_arg(cache_type);
  std::vector<PasskeyCell> cells;
  {
    const PythonSignals signals;
    py::gil_scoped_release release;
    ProgressOut out(progress, "passkey", "prompts");
    cells = run_passkey(*self.m->model, self.m->tokenizer, s, [&](long long done, long long total) { out(done, total); });
    out.finish();
  }
  nlohmann::json report = passkey_report(self.m->dir.string(), self.config(), s, self.dtype, cells);
  reword_skipped(report, python_words);
  return report_python(report, self);
}

// Retrieval tasks after RULER, as `pert ruler --json` reports them.
py::object ruler(const PyModel& self, const py::object& tasks_in, std::vector<int> lengths,
                 std::vector<double> depths, int trials, long long seed, const py::object& wording,
                 const py::object& essay, const py::object& cache_type, const py::object& progress) {
  RulerSettings s;
  std::vector<std::string> tasks = list_arg(tasks_in, "tasks", false);
  s.tasks = tasks.size() == 1 && tasks[0] == "all" ? ruler_task_names() : std::move(tasks);
  s.lengths = std::move(lengths);
  s.depths = std::move(depths);
  s.trials = trials;
  s.seed = seed;
  s.wording = parse_ruler_template(text_arg(wording, "template"));
  s.essay_path = path_arg(essay, "essay");
  s.cache_type = cache_arg(cache_type);
  std::vector<RulerCell> cells;
  {
    const PythonSignals signals;
    py::gil_scoped_release release;
    ProgressOut out(progress, "ruler", "prompts");
    cells = run_ruler(*self.m->model, self.m->tokenizer, s, [&](long long done, long long total) { out(done, total); });
    out.finish();
  }
  nlohmann::json report = ruler_report(self.m->dir.string(), self.config(), s, self.dtype, cells);
  reword_skipped(report, python_words);
  return report_python(report, self);
}

// The attention logit of q = k = ones against distance, [heads][distance + 1] (one row for
// schemes added to the embeddings), as `pert positions`.
py::array_t<double> positions(const PyModel& self, std::optional<int> distance_in, std::optional<int> query_in,
                              int layer) {
  const ModelConfig& c = self.config();
  const int distance = distance_in.value_or(default_profile_distance(c));
  const int query_pos = query_in.value_or(distance);
  require(distance >= 1 && distance <= kMaxProfileDistance, "distance: must be from 1 to " + std::to_string(kMaxProfileDistance) + ", got " + std::to_string(distance));
  require(query_pos >= 0 && query_pos <= kMaxProfileDistance, "query_pos: must be from 0 to " + std::to_string(kMaxProfileDistance) + ", got " + std::to_string(query_pos));
  require(distance <= query_pos, "distance: must be at most query_pos (" + std::to_string(query_pos) +
                                     "): keys stop at position 0, got " + std::to_string(distance));
  require(layer >= 0 && layer < c.n_layers, "layer: must be below the model's " + std::to_string(c.n_layers) +
                                                 " layers, got " + std::to_string(layer));
  std::vector<std::vector<double>> profile;
  {
    py::gil_scoped_release release;
    const Model& model = *self.m->model;
    profile = distance_profile(c, [&](const std::string& name) { return model.tensor(name); }, query_pos, distance, layer);
  }
  const size_t rows = profile.size(), cols = size_t(distance) + 1;
  py::array_t<double> out(std::vector<py::ssize_t>{py::ssize_t(rows), py::ssize_t(cols)});
  for (size_t h = 0; h < rows; ++h) std::copy(profile[h].begin(), profile[h].end(), out.mutable_data(h, 0));
  return out;
}

}  // namespace pert::python

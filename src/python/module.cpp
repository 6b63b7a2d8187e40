// The Python module `pert` (its compiled part, pert._pert): models, logits as numpy arrays,
// sessions for incremental decoding, generation as an iterator, perplexity and the distance
// profile, over the same library the CLI runs. The GIL is released while pert computes; every
// pert::Error reaches Python as pert.Error with the CLI's one-line message. src/python/pert/
// __init__.py adds what is simpler in Python (sweep) and the thread settings.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "pert/error.hpp"
#include "pert/evaluation.hpp"
#include "pert/interrupt.hpp"
#include "pert/json_util.hpp"
#include "pert/loaded_model.hpp"
#include "pert/memory.hpp"
#include "pert/passkey.hpp"
#include "pert/ruler.hpp"
#include "pert/positions.hpp"
#include "pert/progress.hpp"
#include "pert/text_generation.hpp"
#include "pert/threads.hpp"

namespace py = pybind11;

namespace pert::python {

namespace {

// Through Python's json module: configs and results are plain JSON either way.
nlohmann::json to_json(py::handle value, const std::string& where) {
  std::string text;
  try {
    text = py::module_::import("json").attr("dumps")(value, py::arg("allow_nan") = false).cast<std::string>();
  } catch (py::error_already_set& e) {
    throw Error(where + ": not JSON (" + std::string(py::str(e.value())) + ")");
  }
  return parse_json(text, where);
}

py::object to_python(const nlohmann::json& j) {
  return py::module_::import("json").attr("loads")(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

void require(bool ok, const std::string& message) {
  if (!ok) throw Error(message);
}

// "(2, 2)": an array's shape as numpy writes it.
std::string shape_text(const py::array& a) {
  std::string s = "(";
  for (py::ssize_t i = 0; i < a.ndim(); ++i) s += (i ? ", " : "") + std::to_string(a.shape(i));
  return s + (a.ndim() == 1 ? ",)" : ")");
}

// A [rows, vocab] float32 array checked against the memory left before numpy allocates it.
void require_array_memory(const std::string& call, int rows, int vocab, const std::string& advice) {
  require_memory(double(rows) * vocab * sizeof(float),
                 call + ": the array of " + std::to_string(rows) + " x " + std::to_string(vocab) + " logits", advice);
}

// "token id 512 is outside the vocabulary [0, 512)" unless 0 <= id < vocab.
template <class Int>
void check_id(Int id, int vocab, const std::string& where) {
  bool negative = false;
  if constexpr (std::is_signed_v<Int>) negative = id < 0;
  if (negative || id >= Int(vocab))
    throw Error(where + ": token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
}

// A numpy array of integers as token ids, at numpy's speed.
template <class Int>
std::vector<int> array_ids(const py::array& a, int vocab, const std::string& where) {
  const auto ids = py::array_t<Int, py::array::c_style | py::array::forcecast>::ensure(a);
  std::vector<int> out(size_t(ids.size()));
  for (size_t i = 0; i < out.size(); ++i) {
    check_id(ids.data()[i], vocab, where);
    out[i] = int(ids.data()[i]);
  }
  return out;
}

// Token ids from any iterable of integers (a list, a 1-D numpy array), each in [0, vocab).
// `where`: "call: argument", e.g. "logits: ids".
std::vector<int> token_ids(py::handle ids, int vocab, const std::string& where) {
  if (py::isinstance<py::str>(ids) || py::isinstance<py::bytes>(ids))
    throw Error(where + ": token ids expected, got a string (tokenize() it first)");
  if (py::isinstance<py::array>(ids)) {
    const auto a = py::reinterpret_borrow<py::array>(ids);
    if (a.ndim() != 1)
      throw Error(where + ": a 1-D sequence of token ids expected, got an array of shape " + shape_text(a));
    if (a.dtype().kind() == 'i') return array_ids<long long>(a, vocab, where);
    if (a.dtype().kind() == 'u') return array_ids<unsigned long long>(a, vocab, where);
  }
  std::vector<int> out;
  try {
    for (py::handle item : py::iter(ids)) {
      if (!PyIndex_Check(item.ptr()) || py::isinstance<py::array>(item))  // int, numpy's integer scalars; not 1.5
        throw Error(where + ": token ids must be integers, got " + std::string(py::repr(item)));
      PyObject* index = PyNumber_Index(item.ptr());
      if (!index) throw py::error_already_set();
      const long long id = py::reinterpret_steal<py::object>(index).cast<long long>();
      check_id(id, vocab, where);
      out.push_back(int(id));
    }
  } catch (py::error_already_set& e) {  // not iterable, or an integer that cannot be had
    throw Error(where + ": token ids expected (" + std::string(py::str(e.value())) + ")");
  } catch (py::cast_error&) {  // past a long long
    throw Error(where + ": a token id is outside the vocabulary [0, " + std::to_string(vocab) + ")");
  }
  return out;
}

unsigned long main_thread = 0;  // Python's main thread (threading.main_thread().ident), set at import

// While it lives (made with the GIL held), pert's long loops look for Ctrl-C about every 100 ms
// when the caller is Python's main thread (the only one signals reach): a pending signal's
// exception (KeyboardInterrupt) stops the work and the call raises it.
class PythonSignals {
 public:
  PythonSignals() {
    if (PyThread_get_thread_ident() != main_thread) return;
    // Once now, too: a call shorter than the hook's period (a generated token, whose caller may be
    // C code such as "".join, which runs no Python between tokens) would never look.
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    hook_.emplace([] {
      py::gil_scoped_acquire gil;
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    });
  }

 private:
  std::optional<InterruptHook> hook_;
};

// A library message (error.hpp) in Python's words: each `field` as the keyword that sets it
// (n_keep as keep, max_windows as chunks, `set K=V` as set={"K": V} ...).
std::string python_words(const std::string& message) {
  static const std::pair<const char*, const char*> kKeywords[] = {
      {"n_keep", "keep"},         {"max_windows", "chunks"},  {"n_buckets", "buckets"}, {"temperature", "temp"},
      {"max_distance", "distance"}, {"allow_scheme_change", "allow_scheme_change=True"},
  };
  return render_fields(message, [](const std::string& field) -> std::string {
    if (field.rfind("set ", 0) == 0) {  // `set K=V`: V as JSON reads it, else a string
      const size_t eq = field.find('=');
      const std::string key = field.substr(4, eq == std::string::npos ? std::string::npos : eq - 4);
      std::string value = eq == std::string::npos ? "" : field.substr(eq + 1);
      const nlohmann::json v = nlohmann::json::parse(value, nullptr, false);
      value = v.is_discarded() || v.is_string() ? "'" + (v.is_string() ? v.get<std::string>() : value) + "'"
              : v.is_null()                      ? "None"
              : v.is_boolean()                   ? (v.get<bool>() ? "True" : "False")
                                                 : v.dump();
      return "set={'" + key + "': " + value + "}";
    }
    for (const auto& [name, keyword] : kKeywords)
      if (field == name) return keyword;
    return "";  // the others are the keywords' own names (n_ctx, stride, mode, query_pos, config)
  });
}

// A UserWarning when encoding `text_name` left characters out (pert::dropped_note).
void warn_dropped(const Tokenizer& tokenizer, size_t before, const std::string& text_name) {
  const std::string note = dropped_note(tokenizer.dropped_characters() - before, text_name);
  if (!note.empty() && PyErr_WarnEx(PyExc_UserWarning, note.c_str(), 1) < 0) throw py::error_already_set();
}

// A model with its tokenizer, shared by the sessions and generations made from it.
struct PyModel {
  std::shared_ptr<const LoadedModel> m;
  std::string dtype;
  const ModelConfig& config() const { return m->model->config(); }
};

// A path as Python spells one (str or os.PathLike).
std::string path_text(py::handle path, const std::string& where) {
  try {
    return py::str(py::module_::import("os").attr("fspath")(path)).cast<std::string>();
  } catch (py::error_already_set& e) {
    throw Error(where + ": a path expected (" + std::string(py::str(e.value())) + ")");
  }
}

PyModel load(py::object dir_in, py::object config, py::object set, bool allow_scheme_change,
             const std::string& dtype) {
  const std::string dir = path_text(dir_in, "load");
  require(!dir.empty(), "load: the model directory must not be empty");
  ConfigOverrides o;
  if (py::isinstance<py::dict>(config))
    o.patches.push_back(to_json(config, "config"));
  else if (!config.is_none())
    o.files.emplace_back(path_text(config, "config"));
  if (!set.is_none()) {
    require(py::isinstance<py::dict>(set), "set: a dict of key.path -> value expected, e.g. {\"rope_scaling.factor\": 8}");
    for (auto [key, value] : py::cast<py::dict>(set))
      o.sets.push_back(py::str(key).cast<std::string>() + "=" + to_json(value, "set").dump());
  }
  o.allow_scheme_change = allow_scheme_change;
  const WeightType type = parse_weight_type(dtype);
  auto loaded = std::make_shared<LoadedModel>();
  {
    const PythonSignals signals;
    py::gil_scoped_release release;
    *loaded = load_model(dir, o, type);
  }
  if (!loaded->note.empty() && PyErr_WarnEx(PyExc_UserWarning, python_words(loaded->note).c_str(), 1) < 0)
    throw py::error_already_set();  // warnings turned into errors
  return {loaded, resolved_dtype(dtype, dir)};
}

// Runs `ids` from position 0 in a fresh state: every position's logits [T][vocab], written
// straight into the array returned.
py::array_t<float> logits(const PyModel& self, py::handle ids_in, const std::string& cache_type) {
  const std::vector<int> ids = token_ids(ids_in, self.config().vocab_size, "logits: ids");
  require(!ids.empty(), "logits: no token ids");
  const CacheType cache = parse_cache_type(cache_type);
  const int T = int(ids.size()), V = self.config().vocab_size;
  require_array_memory("logits", T, V, "; give fewer ids, or use a session");
  py::array_t<float> out(std::vector<py::ssize_t>{T, V});
  float* data = out.mutable_data();
  {
    const PythonSignals signals;
    py::gil_scoped_release release;
    InferenceState state(*self.m->model, T, std::min(T, 512), 1, cache);
    state.forward(ids.data(), T, 0, data, true);
  }
  return out;
}

// Marks an object in use for as long as it lives: a second Python thread reaching it while pert
// computes (the GIL released) gets a pert.Error instead of a data race. Made and destroyed with
// the GIL held (declare it before any gil_scoped_release), which makes the flag safe.
class InUse {
 public:
  InUse(bool& busy, const char* what) : busy_(busy) {
    require(!busy, std::string(what) + ": in use by another thread");
    busy_ = true;
  }
  ~InUse() { busy_ = false; }
  InUse(const InUse&) = delete;
  InUse& operator=(const InUse&) = delete;

 private:
  bool& busy_;
};

// A KV cache of n_ctx positions, fed a few tokens at a time.
struct PySession {
  std::shared_ptr<const LoadedModel> m;
  std::unique_ptr<InferenceState> state;
  bool busy = false;

  py::array_t<float> eval(py::handle ids_in, std::optional<int> pos, bool all_logits) {
    const InUse in_use(busy, "session");
    const std::vector<int> ids = token_ids(ids_in, state->vocab_size(), "eval: ids");
    require(!ids.empty(), "eval: no token ids");
    const int n = int(ids.size()), V = state->vocab_size(), at = pos.value_or(state->n_past());
    require(at >= 0, "eval: pos must be >= 0, got " + std::to_string(at));
    require(n <= state->n_ctx(), "eval: " + std::to_string(n) + " ids exceed the context size " +
                                     std::to_string(state->n_ctx()) + " of this session");  // before an array that large
    if (all_logits)
      require_array_memory("eval", n, V, "; give fewer ids, or all_logits=False");
    py::array_t<float> out(all_logits ? std::vector<py::ssize_t>{n, V} : std::vector<py::ssize_t>{V});
    float* data = out.mutable_data();
    const PythonSignals signals;
    py::gil_scoped_release release;
    state->forward(ids.data(), n, at, data, all_logits);
    return out;
  }

  bool shift(int n_keep, int n_discard) {
    const InUse in_use(busy, "session");
    return state->shift(n_keep, n_discard);
  }
};

// generate() as an iterator of text pieces (each non-empty; the held-back end last).
struct PyGeneration {
  std::shared_ptr<const LoadedModel> m;
  std::unique_ptr<TextGeneration> g;
  bool finished = false, busy = false;

  std::string next() {
    const InUse in_use(busy, "generation");
    std::string piece;
    const PythonSignals signals;
    while (!finished && piece.empty()) {
      py::gil_scoped_release release;
      finished = !g->next(piece);
    }
    if (piece.empty()) throw py::stop_iteration();
    return piece;
  }

  py::dict result() const {
    require(!busy, "generation: in use by another thread");  // its tokens are being appended to
    const GenerateResult& r = g->result();
    py::dict d;
    d["prompt_tokens"] = g->prompt();
    d["tokens"] = r.tokens;
    d["stop"] = finished ? py::object(py::str(r.stop)) : py::object(py::none());
    d["n_ctx"] = g->n_ctx();
    d["n_keep"] = g->n_keep();
    d["context_shifts"] = r.context_shifts;
    d["prompt_seconds"] = r.prompt_seconds;
    d["generate_seconds"] = r.generate_seconds;
    return d;
  }
};

PyGeneration start_generation(const PyModel& self, const std::string& prompt, int n_predict, int n_ctx, int keep, float temp,
                      int top_k, float top_p, float min_p, float repeat_penalty, int repeat_last_n, long long seed,
                      bool ignore_eos, const std::string& cache_type) {
  // The settings check themselves (validate(), by field; python_words names the keywords); the
  // seed's -1 (random) is this front end's, as the CLI's -s -1.
  require(seed >= -1, "seed: must be -1 (random) or >= 0, got " + std::to_string(seed));
  TextGenerationSettings s;
  s.n_predict = n_predict;
  s.n_ctx = n_ctx;
  s.n_keep = keep;
  s.ignore_eos = ignore_eos;
  s.sampling.temperature = temp;
  s.sampling.top_k = top_k;
  s.sampling.top_p = top_p;
  s.sampling.min_p = min_p;
  s.sampling.repeat_penalty = repeat_penalty;
  s.sampling.repeat_last_n = repeat_last_n;
  s.sampling.seed = seed >= 0 ? uint64_t(seed) : std::random_device{}();
  s.cache_type = parse_cache_type(cache_type);
  PyGeneration out{self.m, nullptr};
  const size_t dropped = self.m->tokenizer.dropped_characters();
  {
    const PythonSignals signals;  // the prompt's prefill
    py::gil_scoped_release release;
    out.g = std::make_unique<TextGeneration>(*self.m, prompt, s);
  }
  warn_dropped(self.m->tokenizer, dropped, "prompt");
  return out;
}

// A long task's `progress=` keyword: True for a bar on sys.stderr (which a notebook shows; C's
// stderr it does not), a function called with (done, total[, value]), or False. Made and called
// with the GIL released.
class ProgressOut {
 public:
  ProgressOut(const py::object& progress, const char* task, const char* unit) : progress_(progress) {
    py::gil_scoped_acquire acquire;
    callback_ = PyCallable_Check(progress.ptr());
    if (!callback_ && py::bool_(progress))
      bar_.emplace(task, unit, false, [](const std::string& line) {
        py::gil_scoped_acquire acquire;
        py::module_::import("sys").attr("stderr").attr("write")(line);
      });
  }
  void finish() {  // after the work; an interrupted one leaves its bar where it stopped
    if (bar_) bar_->finish();
  }
  // The bar alone, in its own units (perplexity's positions); the callback is not called.
  void bar(long long done, long long total, const std::string& note) {
    if (bar_) bar_->update(done, total, note);
  }
  // The callback alone (perplexity's windows).
  void call(long long done, long long total, double value) {
    if (!callback_) return;
    py::gil_scoped_acquire acquire;
    progress_(done, total, value);
  }
  void operator()(long long done, long long total, std::optional<double> value = std::nullopt) {
    if (bar_) bar_->update(done, total);
    if (callback_) {
      py::gil_scoped_acquire acquire;
      if (value) progress_(done, total, *value);
      else progress_(done, total);
    }
  }

 private:
  const py::object& progress_;
  bool callback_ = false;
  std::optional<Progress> bar_;
};

// buckets=: "log" or a count, read as the library reads a sweep's settings (True is not a count;
// anything else is shown as Python prints it).
int buckets_argument(const py::object& value) {
  nlohmann::json v = py::str(value).cast<std::string>();
  if (py::isinstance<py::str>(value)) {
    v = value.cast<std::string>();
  } else if (py::isinstance<py::int_>(value) && !py::isinstance<py::bool_>(value)) {
    int overflow = 0;
    const long long n = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
    if (!overflow) v = n;
  }
  return buckets_from_json(v, "`buckets`");
}

// perplexity of a text (a string, a file, or token ids) at one context length, as `pert
// perplexity --json` reports it.
py::object perplexity(const PyModel& self, py::object text, py::object file, py::object tokens, int n_ctx,
                      const std::string& mode, int stride, int chunks, const py::object& buckets, bool split_docs,
                      const std::string& cache_type, py::object progress) {
  require(int(!text.is_none()) + int(!file.is_none()) + int(!tokens.is_none()) == 1,
          "perplexity: give exactly one of text=, file= or tokens=");
  const ModelConfig& c = self.config();
  EvalSpec spec;
  spec.mode = mode;
  spec.stride = stride;
  spec.max_windows = chunks;
  spec.buckets = buckets_argument(buckets);
  spec.split_docs = split_docs;
  spec.validate();  // by field; python_words names the keywords
  require(n_ctx >= 0, "n_ctx: must be >= 0 (0: the trained length), got " + std::to_string(n_ctx));
  const int bos = spec.bos(self.m->tokenizer, c.bos_token_id);
  PerplexityOptions o = spec.options(n_ctx > 0 ? n_ctx : c.max_position_embeddings, bos);
  o.cache_type = parse_cache_type(cache_type);
  std::vector<int> ids;
  if (!tokens.is_none()) ids = token_ids(tokens, c.vocab_size, "perplexity: tokens");
  require(text.is_none() || py::isinstance<py::str>(text), "text: a str expected (file= takes a path)");
  const std::string text_str = text.is_none() ? "" : text.cast<std::string>();
  if (!file.is_none()) spec.text_file = path_text(file, "file");
  const size_t dropped = self.m->tokenizer.dropped_characters();
  {
    const PythonSignals signals;
    py::gil_scoped_release release;
    if (!file.is_none()) ids = spec.tokenize(self.m->tokenizer, bos);
    else if (!text.is_none()) ids = spec.tokenize_text(self.m->tokenizer, bos, text_str);
  }
  warn_dropped(self.m->tokenizer, dropped, file.is_none() ? "text" : spec.text_file);
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
  return to_python(perplexity_report(self.m->dir.string(), c, spec, o, ids.size(), self.dtype, cache_type, r));
}

// Pass-key retrieval, as `pert passkey --json` reports it.
py::object passkey(const PyModel& self, std::vector<int> lengths, std::vector<double> depths, int trials,
                   long long seed, const std::string& cache_type, const py::object& progress) {
  PasskeySettings s;
  s.lengths = std::move(lengths);
  s.depths = std::move(depths);
  s.trials = trials;
  s.seed = seed;
  s.cache_type = parse_cache_type(cache_type);
  std::vector<PasskeyCell> cells;
  {
    const PythonSignals signals;
    py::gil_scoped_release release;
    ProgressOut out(progress, "passkey", "prompts");
    cells = run_passkey(*self.m->model, self.m->tokenizer, s, [&](long long done, long long total) { out(done, total); });
    out.finish();
  }
  return to_python(passkey_report(self.m->dir.string(), self.config(), s, self.dtype, cells));
}

// Retrieval tasks after RULER, as `pert ruler --json` reports them.
py::object ruler(const PyModel& self, std::vector<std::string> tasks, std::vector<int> lengths,
                 std::vector<double> depths, int trials, long long seed, const std::string& wording,
                 const std::string& essay, const std::string& cache_type, const py::object& progress) {
  RulerSettings s;
  s.tasks = tasks.size() == 1 && tasks[0] == "all" ? ruler_task_names() : std::move(tasks);
  s.lengths = std::move(lengths);
  s.depths = std::move(depths);
  s.trials = trials;
  s.seed = seed;
  s.wording = parse_ruler_template(wording);
  s.essay_path = essay;
  s.cache_type = parse_cache_type(cache_type);
  std::vector<RulerCell> cells;
  {
    const PythonSignals signals;
    py::gil_scoped_release release;
    ProgressOut out(progress, "ruler", "prompts");
    cells = run_ruler(*self.m->model, self.m->tokenizer, s, [&](long long done, long long total) { out(done, total); });
    out.finish();
  }
  nlohmann::json report = ruler_report(self.m->dir.string(), self.config(), s, self.dtype, cells);
  for (nlohmann::json& c : report["cells"])
    if (c.contains("skipped")) c["skipped"] = python_words(c["skipped"].get<std::string>());
  return to_python(report);
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

// Objects of `cls` are made only by pert (load, Model.session, Model.generate): Model.__new__(Model)
// would give one whose C++ part was never made, and pybind11 hands a method such an object's
// uninitialised memory. Its __new__ is a TypeError instead (pybind11 makes instances without it).
void made_only_by(py::handle cls, const std::string& maker) {
  const std::string name = py::str(cls.attr("__name__"));
  cls.attr("__new__") = py::cpp_function([name, maker](py::args, py::kwargs) -> py::object {
    throw py::type_error("pert." + name + " cannot be made directly; use " + maker);
  });
}

}  // namespace

}  // namespace pert::python

PYBIND11_MODULE(_pert, m) {
  using namespace pert;
  using namespace pert::python;
  m.doc() = "pert: positional-encoding runtime for transformers (the compiled part; import pert)";
  m.attr("__version__") = PERT_VERSION;
  main_thread = py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();
  // pert.Error and its pert.SchemeChangeError, their messages in Python's words.
  static py::exception<Error> error(m, "Error", PyExc_Exception);
  static py::exception<SchemeChangeError> scheme_change(m, "SchemeChangeError", error.ptr());
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const SchemeChangeError& e) {
      scheme_change(python_words(e.what()).c_str());
    } catch (const Error& e) {
      error(python_words(e.what()).c_str());
    }
  });

  m.def("set_threads", &set_threads, py::arg("threads"),
        "Threads pert runs on: > 0 exactly that many; 0 the CLI's default (OMP_NUM_THREADS, else the cores not busy now)");
  m.def("threads", [] { return omp_get_max_threads(); }, "Threads pert runs on now");

  py::class_<PyModel>(m, "Model", "A model directory loaded with its tokenizer (pert.load)")
      .def_property_readonly("dir", [](const PyModel& s) { return s.m->dir.string(); })
      .def_property_readonly("dtype", [](const PyModel& s) { return s.dtype; })
      .def_property_readonly("config", [](const PyModel& s) { return to_python(to_json(s.config())); },
                             "The resolved config, every default filled in (as pert inspect --json)")
      .def_property_readonly("position", [](const PyModel& s) { return describe_position(s.config()); })
      .def_property_readonly("label", [](const PyModel& s) { return position_label(s.config()); })
      .def_property_readonly("vocab_size", [](const PyModel& s) { return s.config().vocab_size; })
      .def_property_readonly("trained_length", [](const PyModel& s) { return s.config().max_position_embeddings; })
      .def_property_readonly("bos", [](const PyModel& s) { return s.config().bos_token_id; })
      .def("tokenize",
           [](const PyModel& s, std::string_view text, bool add_special) {  // (a view of the str's UTF-8: no copy)
             const size_t dropped = s.m->tokenizer.dropped_characters();
             std::vector<int> ids;
             {
               const PythonSignals signals;
               py::gil_scoped_release release;
               ids = s.m->tokenizer.encode(text, add_special);
             }
             warn_dropped(s.m->tokenizer, dropped, "text");
             return ids;
           },
           py::arg("text"), py::arg("add_special") = false,
           "Token ids of a text (add_special: with the tokenizer's special tokens around it, e.g. <s> first)")
      .def("detokenize",
           [](const PyModel& s, py::handle ids) {
             return s.m->tokenizer.decode(token_ids(ids, s.m->tokenizer.vocab_size(), "detokenize: ids"));
           },
           py::arg("ids"), "Text of token ids (special tokens skipped)")
      .def("logits", &logits, py::arg("ids"), py::arg("cache_type") = "f32",
           "Every position's logits, float32 [T, vocab], from one prefill of ids at positions 0..T-1")
      .def("session",
           [](const PyModel& s, int n_ctx, int n_batch, const std::string& cache_type) {
             require(n_ctx >= 0, "n_ctx: must be >= 0 (0: the trained length), got " + std::to_string(n_ctx));
             const CacheType cache = parse_cache_type(cache_type);
             PySession out{s.m, nullptr};
             py::gil_scoped_release release;
             out.state = std::make_unique<InferenceState>(*s.m->model, n_ctx > 0 ? n_ctx : s.config().max_position_embeddings,
                                                          n_batch, 1, cache);
             return out;
           },
           py::arg("n_ctx") = 0, py::arg("n_batch") = 512, py::arg("cache_type") = "f32",
           "A KV cache of n_ctx positions (0: the trained length) for incremental decoding")
      .def("generate", &start_generation, py::arg("prompt"), py::arg("n_predict") = 256, py::arg("n_ctx") = 0,
           py::arg("keep") = 0, py::arg("temp") = 0.8f, py::arg("top_k") = 40, py::arg("top_p") = 0.95f,
           py::arg("min_p") = 0.05f, py::arg("repeat_penalty") = 1.0f, py::arg("repeat_last_n") = 64,
           py::arg("seed") = -1, py::arg("ignore_eos") = false, py::arg("cache_type") = "f32",
           "Text generated from a prompt, as an iterator of text pieces (pert generate's flags by name)")
      .def("perplexity", &perplexity, py::kw_only(), py::arg("text") = py::none(), py::arg("file") = py::none(),
           py::arg("tokens") = py::none(), py::arg("n_ctx") = 0, py::arg("mode") = "chunks", py::arg("stride") = 0,
           py::arg("chunks") = 0, py::arg("buckets") = "log", py::arg("split_docs") = false,
           py::arg("cache_type") = "f32", py::arg("progress") = false,
           "Perplexity and NLL by position at one context length, as pert perplexity --json")
      .def("passkey", &passkey, py::arg("lengths"), py::kw_only(),
           py::arg("depths") = std::vector<double>{0, 0.25, 0.5, 0.75, 1}, py::arg("trials") = 5,
           py::arg("seed") = 1234, py::arg("cache_type") = "f32", py::arg("progress") = false,
           "Pass-key retrieval accuracy by prompt length and depth, as pert passkey --json")
      .def("ruler", &ruler, py::arg("tasks"), py::arg("lengths"), py::kw_only(),
           py::arg("depths") = std::vector<double>{0, 0.25, 0.5, 0.75, 1}, py::arg("trials") = 5,
           py::arg("seed") = 1234, py::arg("template") = "short", py::arg("essay") = "", py::arg("cache_type") = "f32",
           py::arg("progress") = false,
           "Retrieval tasks after RULER (tasks: names or ['all']) by task, length and depth, as pert ruler --json")
      .def("positions", &positions, py::kw_only(), py::arg("distance") = py::none(),
           py::arg("query_pos") = py::none(), py::arg("layer") = 0,
           "The attention logit of q = k = ones against distance, float64 [heads, distance + 1]")
      .def("__repr__", [](const PyModel& s) {
        return "<pert.Model " + s.m->dir.string() + ": " + position_label(s.config()) + ", " + s.dtype + ">";
      });

  py::class_<PySession>(m, "Session", "A KV cache fed a few tokens at a time (Model.session)")
      .def("eval", &PySession::eval, py::arg("ids"), py::arg("pos") = py::none(), py::arg("all_logits") = false,
           "Runs ids at positions pos.. (default: after what is cached; an earlier pos replaces from there); "
           "the last position's logits [vocab], or every one's [n, vocab] with all_logits")
      .def("shift", &PySession::shift,
           py::arg("n_keep"), py::arg("n_discard"),
           "Drops cached positions [n_keep, n_keep + n_discard) and moves the rest back (llama.cpp's context shift); "
           "False, touching nothing, when the scheme's positions are baked into the cache")
      .def_property_readonly("n_past", [](const PySession& s) {
        require(!s.busy, "session: in use by another thread");  // its count is being changed
        return s.state->n_past();
      })
      .def_property_readonly("n_ctx", [](const PySession& s) { return s.state->n_ctx(); });

  py::class_<PyGeneration>(m, "Generation", "Text pieces as they are generated (Model.generate)")
      .def("__iter__", [](PyGeneration& g) -> PyGeneration& { return g; })
      .def("__next__", &PyGeneration::next)
      // py::object, not the accessor dict[...] returns: that would outlive its dict.
      .def_property_readonly("tokens", [](const PyGeneration& g) { return py::object(g.result()["tokens"]); })
      .def_property_readonly("stop", [](const PyGeneration& g) { return py::object(g.result()["stop"]); })
      .def("result", &PyGeneration::result, "Prompt and generated tokens, stop reason, context shifts, timings");

  made_only_by(m.attr("Model"), "pert.load(dir)");
  made_only_by(m.attr("Session"), "Model.session()");
  made_only_by(m.attr("Generation"), "Model.generate(prompt)");

  m.def("load", &load, py::arg("dir"), py::arg("config") = py::none(), py::arg("set") = py::none(),
        py::arg("allow_scheme_change") = false, py::arg("dtype") = "auto",
        "Loads a model directory; config: a JSON merge-patch file or a dict; set: {\"key.path\": value}");
}

// The Python module `pert` (its compiled part, pert._pert): models, logits as numpy arrays,
// sessions for incremental decoding, generation as an iterator, perplexity and the distance
// profile, over the same library the CLI runs (the task bindings in tasks.cpp, conversions in
// convert.cpp, the sweep's grid in grid.cpp, what they share in bindings.hpp). The GIL is
// released while pert computes; every pert::Error reaches Python as pert.Error with the CLI's
// one-line message. src/python/pert/__init__.py adds sweep and merge (over grid.cpp's calls)
// and the thread settings.
#include "python/bindings.hpp"

#include <omp.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "pert/error.hpp"
#include "pert/evaluation.hpp"
#include "pert/passkey.hpp"
#include "pert/positions.hpp"
#include "pert/ruler.hpp"
#include "pert/text_generation.hpp"
#include "pert/threads.hpp"

namespace pert::python {

ConfigOverrides load_overrides(const py::object& config, const py::object& set, bool allow_scheme_change) {
  ConfigOverrides o;
  if (py::isinstance<py::dict>(config))
    o.patches.push_back(to_json(config, "config"));
  else if (!config.is_none())
    o.files.emplace_back(path_arg(config, "config"));
  if (!set.is_none()) {
    require(py::isinstance<py::dict>(set), "set: a dict of key.path -> value expected, e.g. {\"rope_scaling.factor\": 8}");
    for (auto [key, value] : py::cast<py::dict>(set))
      o.sets.push_back(text_arg(py::str(key), "set") + "=" + to_json(value, "set").dump());
  }
  o.allow_scheme_change = allow_scheme_change;
  return o;
}

namespace {

PyModel load(py::object dir_in, py::object config, py::object set, bool allow_scheme_change,
             const py::object& dtype_in) {
  const std::string dir = path_arg(dir_in, "dir");
  require(!dir.empty(), "load: the model directory must not be empty");
  const std::string dtype = text_arg(dtype_in, "dtype");
  const ConfigOverrides o = load_overrides(config, set, allow_scheme_change);
  const WeightType type = parse_weight_type(dtype);
  auto loaded = std::make_shared<LoadedModel>();
  {
    const PythonSignals signals;
    py::gil_scoped_release release;
    *loaded = load_model(dir, o, type);
  }
  if (!loaded->note.empty()) warn(python_words(loaded->note));
  return {loaded, resolved_dtype(dtype, dir)};
}

// Runs `ids` from position 0 in a fresh state: every position's logits [T][vocab], written
// straight into the array returned.
py::array_t<float> logits(const PyModel& self, py::handle ids_in, const py::object& cache_type) {
  const std::vector<int> ids = token_ids(ids_in, self.config().vocab_size, "logits: ids");
  require(!ids.empty(), "logits: no token ids");
  const CacheType cache = cache_arg(cache_type);
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

  py::array_t<float> eval(py::handle ids_in, std::optional<int> pos, bool all_logits, py::handle positions_in) {
    const InUse in_use(busy, "session");
    const std::vector<int> ids = token_ids(ids_in, state->vocab_size(), "eval: ids");
    require(!ids.empty(), "eval: no token ids");
    const std::vector<int> positions = axis_positions(positions_in, ids.size(), "eval: positions");
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
    state->forward(ids.data(), n, at, data, all_logits, positions.empty() ? nullptr : positions.data());
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

PyGeneration start_generation(const PyModel& self, const py::object& prompt_in, int n_predict, int n_ctx, int keep, float temp,
                      int top_k, float top_p, float min_p, float repeat_penalty, int repeat_last_n, long long seed,
                      bool ignore_eos, const py::object& cache_type) {
  const std::string prompt = text_arg(prompt_in, "prompt");
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
  s.cache_type = cache_arg(cache_type);
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
      PyErr_SetObject(scheme_change.ptr(), readable(python_words(e.what())).ptr());
    } catch (const Error& e) {  // (a message may quote a path's undecodable bytes)
      PyErr_SetObject(error.ptr(), readable(python_words(e.what())).ptr());
    }
  });

  m.def(
      "set_threads",
      [](int threads) {
        set_threads(threads);
        if (const std::string warning = busy_cores_warning(threads); !warning.empty())
          warn(warning);
      },
      py::arg("threads"),
        "Threads pert runs on: > 0 exactly that many; 0 the CLI's default (OMP_NUM_THREADS, else the cores not busy now)");
  m.def("threads", [] { return omp_get_max_threads(); }, "Threads pert runs on now");

  py::class_<PyModel>(m, "Model", "A model directory loaded with its tokenizer (pert.load)")
      .def_property_readonly("dir", [](const PyModel& s) { return path_str(s.m->dir.string()); })
      .def_property_readonly("dtype", [](const PyModel& s) { return s.dtype; })
      .def_property_readonly("config", [](const PyModel& s) { return to_python(to_json(s.config())); },
                             "The resolved config, every default filled in (as pert inspect --json)")
      .def_property_readonly("position", [](const PyModel& s) { return describe_position(s.config()); })
      .def_property_readonly("label", [](const PyModel& s) { return position_label(s.config()); })
      .def_property_readonly("vocab_size", [](const PyModel& s) { return s.config().vocab_size; })
      .def_property_readonly("trained_length", [](const PyModel& s) { return s.config().max_position_embeddings; })
      .def_property_readonly("bos", [](const PyModel& s) { return s.config().bos_token_id; })
      .def("tokenize",
           [](const PyModel& s, const py::object& text_in, bool add_special) {
             const std::string_view text = utf8(text_in, "text");  // (the str's own UTF-8: no copy)
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
           [](const PyModel& s, int n_ctx, int n_batch, const py::object& cache_type) {
             require(n_ctx >= 0, "n_ctx: must be >= 0 (0: the trained length), got " + std::to_string(n_ctx));
             const CacheType cache = cache_arg(cache_type);
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
           py::arg("cache_type") = "f32", py::arg("progress") = false, py::arg("key_tokens") = false,
           py::arg("key_short") = 4096, py::arg("key_step") = 0, py::arg("key_alpha") = 2.0, py::arg("key_beta") = -2.0,
           py::arg("key_model") = py::none(), py::arg("key_config") = py::none(),
           "Perplexity and NLL by position at one context length, as pert perplexity --json; key_tokens=True: "
           "the key-token perplexity (LongPPL) beside it, as --key-tokens and its flags")
      .def("attention", &pert::python::attention, py::kw_only(), py::arg("text") = py::none(), py::arg("file") = py::none(),
           py::arg("tokens") = py::none(), py::arg("n_ctx") = 0, py::arg("chunks") = 0, py::arg("sink") = 1,
           py::arg("split_docs") = false, py::arg("cache_type") = "f32", py::arg("progress") = false,
           "Per layer and head: entropy, sink mass, mean distance, largest weight ([layers, heads]) and mass by "
           "distance bucket ([layers, heads, buckets]) of the attention weights over a text's windows of n_ctx "
           "positions, for all queries and (past the trained length) in_L and past_L apart, as pert attention")
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
        return readable("<pert.Model " + s.m->dir.string() + ": " + position_label(s.config()) + ", " + s.dtype + ">");
      });

  py::class_<PySession>(m, "Session", "A KV cache fed a few tokens at a time (Model.session)")
      .def("eval", &PySession::eval, py::arg("ids"), py::arg("pos") = py::none(), py::arg("all_logits") = false,
           py::arg("positions") = py::none(),
           "Runs ids at positions pos.. (default: after what is cached; an earlier pos replaces from there, as far back as "
           "the cache holds: with a sliding window, n_batch positions); "
           "the last position's logits [vocab], or every one's [n, vocab] with all_logits. "
           "positions: one [t, h, w] per id for M-RoPE models (Qwen2-VL, Qwen3-VL), a 2-D or 3-D layout of the tokens")
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
  add_grid(m);
}

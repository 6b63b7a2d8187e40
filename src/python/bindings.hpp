// What the module's files share (src/python/): conversions between Python and pert, the model
// object, Ctrl-C while pert computes, progress for long tasks, and the task bindings (tasks.cpp)
// that module.cpp registers.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pert/evaluation.hpp"
#include "pert/interrupt.hpp"
#include "pert/json_util.hpp"
#include "pert/loaded_model.hpp"
#include "pert/progress.hpp"

namespace py = pybind11;

namespace pert::python {

// Through Python's json module: configs and results are plain JSON either way.
nlohmann::json to_json(py::handle value, const std::string& where);
py::object to_python(const nlohmann::json& j);
void require(bool ok, const std::string& message);  // pert::Error(message) unless ok
// A [rows, vocab] float32 array checked against the memory left before numpy allocates it.
void require_array_memory(const std::string& call, int rows, int vocab, const std::string& advice);
// Token ids from any iterable of integers (a list, a 1-D numpy array), each in [0, vocab).
// `where`: "call: argument", e.g. "logits: ids".
std::vector<int> token_ids(py::handle ids, int vocab, const std::string& where);
// M-RoPE's positions per axis: n rows of [t, h, w] integers (nested lists, an [n, 3] array),
// flattened; empty for None. `where`: "eval: positions".
std::vector<int> axis_positions(py::handle positions, size_t n, const std::string& where);
// A library message (error.hpp) in Python's words: each `field` as the keyword that sets it.
std::string python_words(const std::string& message);
// A UserWarning when encoding `text_name` left characters out (pert::dropped_note).
void warn_dropped(const Tokenizer& tokenizer, size_t before, const std::string& text_name);
// Every str and path argument comes through these, each error a pert.Error naming the argument
// (`name`): a str with a lone surrogate is not text, and pybind11's own casts would say only
// "Unable to cast Python instance to C++ type".
// A path (str, bytes or os.PathLike) as the bytes the file system holds (os.fsencode's).
std::string path_arg(py::handle value, const std::string& name);
// A str as UTF-8 (anything else refused).
std::string text_arg(py::handle value, const std::string& name);
CacheType cache_arg(py::handle value);  // cache_type=
// A list (any iterable but a string) of paths or of str.
std::vector<std::string> list_arg(py::handle value, const std::string& name, bool paths);
// text_arg's UTF-8 without a copy: the str's own (valid while the str lives).
std::string_view utf8(py::handle str, const std::string& name);
// Bytes pert made (a message, which may quote a path's undecodable bytes) as a str, those bytes as \x80.
py::str readable(const std::string& bytes);
// path_arg's bytes, refused unless UTF-8: a sweep's records and identity, and a result's settings,
// are JSON, which names each model, config and text by its path.
std::string grid_path(py::handle value, const std::string& name);
// A path's bytes as os.fsdecode gives them back: path_arg of the result is those bytes again.
py::str path_str(const std::string& bytes);
// A UserWarning with pert's message (readable).
void warn(const std::string& message);
// load()'s config= (a dict or a file), set= (a dict of key.path -> value) and allow_scheme_change=.
ConfigOverrides load_overrides(const py::object& config, const py::object& set, bool allow_scheme_change);
// The evaluation's keywords (mode=, stride=, chunks=, buckets=: "log" or a count, split_docs=) as
// an EvalSpec, checked by field (python_words names the keywords).
EvalSpec eval_spec(const py::object& mode, int stride, int chunks, const py::object& buckets, bool split_docs);
// The key-token keywords (key_tokens=, key_short=, key_step=, key_alpha=, key_beta=, key_model=:
// a path or None, key_config=: a path, a dict or a list of them) into `spec`, checked by field.
void key_spec(EvalSpec& spec, bool key_tokens, int key_short, int key_step, double key_alpha, double key_beta,
              const py::object& key_model, const py::object& key_config);

extern unsigned long main_thread;  // Python's main thread (threading.main_thread().ident), set at import

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

// A model with its tokenizer, shared by the sessions and generations made from it.
struct PyModel {
  std::shared_ptr<const LoadedModel> m;
  std::string dtype;
  const ModelConfig& config() const { return m->model->config(); }
};

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
  // The callback alone (perplexity's windows, with the running PPL; attention's, without).
  void call(long long done, long long total, std::optional<double> value = std::nullopt) {
    if (!callback_) return;
    py::gil_scoped_acquire acquire;
    if (value) progress_(done, total, *value);
    else progress_(done, total);
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

// The task bindings (tasks.cpp), each as its `pert` command's --json reports it.
py::object perplexity(const PyModel& self, py::object text, py::object file, py::object tokens, int n_ctx,
                      const py::object& mode, int stride, int chunks, const py::object& buckets, bool split_docs,
                      const py::object& cache_type, py::object progress, bool key_tokens, int key_short, int key_step,
                      double key_alpha, double key_beta, const py::object& key_model, const py::object& key_config);
py::object attention(const PyModel& self, py::object text, py::object file, py::object tokens, int n_ctx, int chunks,
                     int sink, bool split_docs, const py::object& cache_type, py::object progress);
py::object passkey(const PyModel& self, std::vector<int> lengths, std::vector<double> depths, int trials,
                   long long seed, const py::object& cache_type, const py::object& progress);
py::object ruler(const PyModel& self, const py::object& tasks, std::vector<int> lengths,
                 std::vector<double> depths, int trials, long long seed, const py::object& wording,
                 const py::object& essay, const py::object& cache_type, const py::object& progress);
// pert.sweep's and pert.merge's grid (grid.cpp): _grid_plan and _merge_plan, added to the module.
void add_grid(py::module_& m);

py::array_t<double> positions(const PyModel& self, std::optional<int> distance_in, std::optional<int> query_in,
                              int layer);

}  // namespace pert::python

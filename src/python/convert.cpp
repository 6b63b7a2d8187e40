// Conversions between Python and pert for the module's bindings (bindings.hpp).
#include <string>
#include <type_traits>
#include <vector>

#include "bindings.hpp"
#include "pert/error.hpp"
#include "pert/memory.hpp"

namespace pert::python {

namespace {

// "(2, 2)": an array's shape as numpy writes it.
std::string shape_text(const py::array& a) {
  std::string s = "(";
  for (py::ssize_t i = 0; i < a.ndim(); ++i) s += (i ? ", " : "") + std::to_string(a.shape(i));
  return s + (a.ndim() == 1 ? ",)" : ")");
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

}  // namespace

unsigned long main_thread = 0;

// A [rows, vocab] float32 array checked against the memory left before numpy allocates it.
void require_array_memory(const std::string& call, int rows, int vocab, const std::string& advice) {
  require_memory(double(rows) * vocab * sizeof(float),
                 call + ": the array of " + std::to_string(rows) + " x " + std::to_string(vocab) + " logits", advice);
}

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

// A library message (error.hpp) in Python's words: each `field` as the keyword that sets it
// (n_keep as keep, max_windows as chunks, `set K=V` as set={"K": V} ...).
std::string python_words(const std::string& message) {
  static const std::pair<const char*, const char*> kKeywords[] = {
      {"n_keep", "keep"},         {"max_windows", "chunks"},  {"n_buckets", "buckets"}, {"temperature", "temp"},
      {"max_distance", "distance"}, {"allow_scheme_change", "allow_scheme_change=True"},
      {"partial", "partial=True"},
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

// A path as Python spells one (str or os.PathLike).
std::string path_text(py::handle path, const std::string& where) {
  try {
    return py::str(py::module_::import("os").attr("fspath")(path)).cast<std::string>();
  } catch (py::error_already_set& e) {
    throw Error(where + ": a path expected (" + std::string(py::str(e.value())) + ")");
  }
}

}  // namespace pert::python

// Conversions between Python and pert for the module's bindings (bindings.hpp).
#include <algorithm>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "pert/error.hpp"
#include "pert/memory.hpp"
#include "python/bindings.hpp"

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

// "NAME: '\\udc80' is a lone surrogate ...": what `e` (a UnicodeEncodeError of `str`) met, with
// the characters around it, so a long text's culprit can be found.
std::string not_text(const py::object& str, const py::error_already_set& e, const std::string& name) {
  const Py_ssize_t at = e.value().attr("start").cast<Py_ssize_t>();
  const py::object c = str[py::slice(at, at + 1, 1)];
  const py::object around = str[py::slice(std::max<Py_ssize_t>(0, at - 12), at + 13, 1)];
  auto ascii = [](const py::object& o) { return py::module_::import("builtins").attr("ascii")(o).cast<std::string>(); };
  return name + ": " + ascii(c) + " (character " + std::to_string(at) + ", in " + ascii(around) +
         ") is a lone surrogate, which is not text UTF-8 can encode";
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
  py::object text;
  try {  // (not ASCII: a lone surrogate stays one, for utf8 to name)
    text = py::module_::import("json").attr("dumps")(value, py::arg("allow_nan") = false, py::arg("ensure_ascii") = false);
  } catch (py::error_already_set& e) {
    throw Error(where + ": not JSON (" + std::string(py::str(e.value())) + ")");
  }
  return parse_json(std::string(utf8(text, where)), where);
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

std::vector<int> axis_positions(py::handle given, size_t n, const std::string& where) {
  if (given.is_none()) return {};
  const py::array a = py::array::ensure(given);
  if (!a || a.ndim() != 2 || size_t(a.shape(0)) != n || a.shape(1) != 3)
    throw Error(where + ": one [t, h, w] per id expected (" + std::to_string(n) + " x 3), got " +
                (a ? "an array of shape " + shape_text(a) : std::string(py::repr(given))));
  if (a.dtype().kind() != 'i' && a.dtype().kind() != 'u')
    throw Error(where + ": integers expected, got dtype " + std::string(py::str(a.dtype())));
  const auto wide = py::array_t<long long, py::array::c_style | py::array::forcecast>::ensure(a);
  std::vector<int> out(size_t(wide.size()));
  for (size_t i = 0; i < out.size(); ++i) {
    const long long p = wide.data()[i];
    if (p < 0 || p > std::numeric_limits<int>::max())
      throw Error(where + ": id " + std::to_string(i / 3) + "'s position " + std::to_string(p) + " is outside [0, 2^31)");
    out[i] = int(p);
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
  if (!note.empty()) warn(note);
}

// A path as Python spells one (str, bytes or os.PathLike) as the bytes the file system holds:
// os.fsencode's, so a name os.listdir gave with undecodable bytes (surrogate-escaped) opens.
std::string path_arg(py::handle value, const std::string& name) {
  const py::module_ os = py::module_::import("os");
  py::object path;
  try {
    path = os.attr("fspath")(value);
  } catch (py::error_already_set& e) {
    throw Error(name + ": a path expected (" + std::string(py::str(e.value())) + ")");
  }
  if (PyUnicode_Check(path.ptr())) {
    try {
      path = os.attr("fsencode")(path);
    } catch (py::error_already_set& e) {  // a surrogate that escapes no byte
      if (!e.matches(PyExc_UnicodeEncodeError)) throw;
      throw Error(not_text(path, e, name));
    }
  }
  std::string bytes = path.cast<std::string>();
  // open() would stop at it, reading another file than the one named
  require(bytes.find('\0') == std::string::npos, name + ": " + std::string(py::repr(path)) + " holds a NUL character, which no path can");
  return bytes;
}

std::string text_arg(py::handle value, const std::string& name) { return std::string(utf8(value, name)); }

CacheType cache_arg(py::handle value) { return parse_cache_type(text_arg(value, "cache_type")); }

std::vector<std::string> list_arg(py::handle value, const std::string& name, bool paths) {
  require(!PyUnicode_Check(value.ptr()) && !PyBytes_Check(value.ptr()),
          name + ": a list expected, got a " + Py_TYPE(value.ptr())->tp_name + " (put it in [])");
  std::vector<std::string> out;
  py::iterator items;
  try {
    items = py::iter(value);
  } catch (py::error_already_set&) {
    throw Error(name + ": a list expected, got " + Py_TYPE(value.ptr())->tp_name);
  }
  for (py::handle item : items) out.push_back(paths ? path_arg(item, name) : text_arg(item, name));
  return out;
}

std::string_view utf8(py::handle str, const std::string& name) {
  require(PyUnicode_Check(str.ptr()), name + ": a str expected, got " + Py_TYPE(str.ptr())->tp_name);
  Py_ssize_t size = 0;
  if (const char* data = PyUnicode_AsUTF8AndSize(str.ptr(), &size)) return {data, size_t(size)};
  py::error_already_set e;  // (fetched: the UnicodeEncodeError)
  if (!e.matches(PyExc_UnicodeEncodeError)) throw e;
  throw Error(not_text(py::reinterpret_borrow<py::object>(str), e, name));
}

py::str readable(const std::string& bytes) {
  PyObject* s = PyUnicode_DecodeUTF8(bytes.data(), Py_ssize_t(bytes.size()), "backslashreplace");
  if (!s) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(s);
}

py::str path_str(const std::string& bytes) {
  return py::module_::import("os").attr("fsdecode")(py::bytes(bytes));
}

void warn(const std::string& message) {
  if (PyErr_WarnEx(PyExc_UserWarning, readable(message).cast<std::string>().c_str(), 1) < 0) throw py::error_already_set();
}

}  // namespace pert::python

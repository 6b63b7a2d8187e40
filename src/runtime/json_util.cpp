#include "pert/json_util.hpp"

#include <fstream>
#include <sstream>

#include "pert/error.hpp"

namespace pert {

void check_input_file(const std::filesystem::path& path, bool streams) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  switch (st.type()) {
    case fs::file_type::regular: return;
    case fs::file_type::fifo:
      if (streams) return;
      throw IoError(path.string() + ": a pipe, not a regular file");
    case fs::file_type::not_found: throw IoError(path.string() + ": cannot open file: not found");
    case fs::file_type::directory: throw IoError(path.string() + ": is a directory, expected a file");
    case fs::file_type::character:
    case fs::file_type::block:
      throw IoError(path.string() + ": a device, not a regular file" + (streams ? " (a pipe works, e.g. <(command))" : ""));
    case fs::file_type::none:
    case fs::file_type::unknown:  // stat failed (permissions): open() says why
      return;
    default: throw IoError(path.string() + ": not a regular file");
  }
}

std::string read_text_file(const std::filesystem::path& path, size_t max_bytes, bool streams) {
  namespace fs = std::filesystem;
  std::error_code ec;
  check_input_file(path, streams);
  const fs::file_status st = fs::status(path, ec);
  if (st.type() == fs::file_type::regular && fs::file_size(path, ec) > max_bytes && !ec)
    throw IoError(path.string() + ": " + std::to_string(fs::file_size(path, ec)) + " bytes, more than the " +
                  std::to_string(max_bytes >> 20) + " MiB pert reads of such a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path.string() + ": cannot open file");
  std::string text;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, size_t(in.gcount()));
    if (text.size() > max_bytes)  // a stream or a device that does not end
      throw IoError(path.string() + ": more than the " + std::to_string(max_bytes >> 20) +
                    " MiB pert reads of such a file");
    if (in.eof()) break;
  }
  if (in.bad()) throw IoError(path.string() + ": read error");
  return text;
}

std::string printable_lines(std::string_view s) {
  std::string out;
  for (size_t at = 0; at <= s.size();) {
    const size_t end = std::min(s.find('\n', at), s.size());
    out += printable(s.substr(at, end - at));
    if (end < s.size()) out += '\n';
    at = end + 1;
  }
  return out;
}

std::string printable(std::string_view s) {
  std::string out;
  auto escape = [&](unsigned char b) {
    static const char* hex = "0123456789abcdef";
    out += "\\x";
    out += hex[b >> 4];
    out += hex[b & 15];
  };
  for (size_t i = 0; i < s.size();) {
    const unsigned char b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      if (b < 0x20 || b == 0x7f) escape(b);
      else out += char(b);
      ++i;
      continue;
    }
    // A well-formed UTF-8 sequence (no overlongs, surrogates or values past U+10FFFF) is kept.
    const size_t n = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc2 ? 2 : 0;
    bool ok = n > 0 && b <= 0xf4 && i + n <= s.size();
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
    if (ok && n >= 3) {
      const unsigned char c = static_cast<unsigned char>(s[i + 1]);
      ok = !(b == 0xe0 && c < 0xa0) && !(b == 0xed && c >= 0xa0) && !(b == 0xf0 && c < 0x90) && !(b == 0xf4 && c >= 0x90);
    }
    if (ok) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      escape(b);
      ++i;
    }
  }
  return out;
}

void check_json_depth(std::string_view text, const std::string& where) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth)
        throw FormatError(where + ": invalid JSON: nested deeper than " +
                          std::to_string(kMaxJsonDepth) + " levels");
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

nlohmann::json parse_json(std::string_view text, const std::string& where) {
  check_json_depth(text, where);
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(where + ": invalid JSON: " + json_error_text(e));
  }
}

std::string json_error_text(const nlohmann::json::exception& e) {
  const std::string what = e.what();
  const auto pos = what.find("] ");
  return pos == std::string::npos ? what : what.substr(pos + 2);
}

std::string json_file_text(const nlohmann::json& value) {
  return value.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string json_brief(const nlohmann::json& value) {
  std::string s = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

}  // namespace pert

namespace pert {

void reword_skipped(nlohmann::json& report, const std::function<std::string(const std::string&)>& words) {
  for (nlohmann::json& c : report["cells"])
    if (c.contains("skipped")) c["skipped"] = words(c["skipped"].get<std::string>());
}

std::string number_text(double x) {
  std::ostringstream ss;
  ss << x;
  return ss.str();
}

}  // namespace pert

// What makes two cells of a grid the same cell: where a model lives, what a config and a
// model's weights are (hashed), a settings block without what does not change the results, and the
// key a cell is known by (pert/grid_file.hpp).
#include "pert/grid_file.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <vector>

#include "pert/config.hpp"
#include "pert/error.hpp"

namespace pert {

using nlohmann::json;
namespace fs = std::filesystem;

std::string real_path(const std::string& p) {
  std::error_code ec;
  const fs::path r = fs::weakly_canonical(p, ec);
  return ec ? fs::path(p).lexically_normal().string() : r.string();
}

std::string config_stem(const std::string& config) {
  if (config == kPlain) return kPlain;
  return is_inline_config(config) ? read_config_patch(config).dump() : fs::path(config).stem().string();
}

std::string config_hash(const std::string& config) {
  if (config == kPlain) return kPlain;
  if (is_inline_config(config)) return bytes_hash(read_config_patch(config).dump());
  std::error_code ec;
  return fs::is_regular_file(config, ec) ? content_hash(config) : "missing " + config;
}

std::string model_name(const std::string& dir) {
  const fs::path p = fs::path(dir).lexically_normal();
  return (p.has_filename() ? p : p.parent_path()).filename().string();
}

std::map<std::string, std::string> model_names(const json& cells) {
  std::map<std::string, std::string> path_of_name, name;
  std::map<std::string, bool> clash;
  for (const json& c : cells) {
    const std::string model = c["model"], key = real_path(model), n = model_name(model);
    if (path_of_name.count(n) && path_of_name[n] != key) clash[n] = true;
    path_of_name[n] = key;
  }
  for (const json& c : cells) {
    const std::string model = c["model"];
    name[model] = clash[model_name(model)] ? fs::path(model).lexically_normal().string() : model_name(model);
  }
  return name;
}

namespace {

constexpr uint64_t kFnvBasis = 14695981039346656037ull;
uint64_t fnv(uint64_t h, const char* p, size_t n) {
  for (size_t i = 0; i < n; ++i) h = (h ^ uint8_t(p[i])) * 1099511628211ull;
  return h;
}

std::string hex16(uint64_t h) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
  return hex;
}

}  // namespace

std::string bytes_hash(std::string_view bytes) { return hex16(fnv(kFnvBasis, bytes.data(), bytes.size())); }

std::string content_hash(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path.string() + ": cannot open");
  uint64_t h = kFnvBasis;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    h = fnv(h, buf, size_t(in.gcount()));
    if (in.eof()) break;
  }
  return hex16(h);
}

std::string model_hash(const std::string& dir) {
  std::error_code ec;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().filename() == "config.json" || e.path().extension() == ".safetensors") files.push_back(e.path());
  if (ec || files.empty()) return "missing " + dir;
  std::sort(files.begin(), files.end());
  uint64_t h = kFnvBasis;
  std::vector<char> block(1 << 16);
  for (const fs::path& f : files) {
    const std::string name = f.filename().string();
    const uintmax_t size = fs::file_size(f, ec);
    if (ec) return "missing " + f.string();
    h = fnv(fnv(h, name.data(), name.size()), reinterpret_cast<const char*>(&size), sizeof size);
    std::ifstream in(f, std::ios::binary);
    // The whole file when small, else its first block (the header) and 64 spread over the rest.
    const uintmax_t blocks = (size + block.size() - 1) / block.size();
    for (uintmax_t i = 0, step = std::max<uintmax_t>(1, blocks / 64); i < blocks; i += (i == 0 ? 1 : step)) {
      in.seekg(std::streamoff(i * block.size()));
      in.read(block.data(), std::streamsize(block.size()));
      h = fnv(h, block.data(), size_t(in.gcount()));
      in.clear();
    }
  }
  return hex16(h);
}

json comparable_settings(const json& settings) {
  json s = settings;
  if (!s.contains("text_hash")) {
    std::error_code ec;
    const std::string text = s.value("text", "");
    s["text_hash"] = fs::is_regular_file(text, ec) ? content_hash(text) : "missing " + text;
  }
  s.erase("text");
  s.erase("text_path");
  // It only lets a cell run that would otherwise be refused: a cell that ran either way is the
  // same, so a grid may be re-run with it into the file that has its refused cells.
  s.erase("allow_scheme_change");
  return s;
}

std::string cell_key(const std::string& model, const std::string& config_hash, int length) {
  return real_path(model) + "\n" + config_hash + "\n" + std::to_string(length);
}

std::string cell_key(const json& c) { return cell_key(c["model"], c["config_hash"], c["length"]); }

void check_same_weights(const json& cells, const std::string& where) {
  std::map<std::string, std::string> hash_of;
  for (const json& c : cells) {
    const std::string model = c["model"], hash = c["model_hash"];
    if (hash_of.emplace(real_path(model), hash).first->second != hash)
      throw FormatError(where + ": cells of " + model + " come from other weights than its directory holds now (or " +
                        "than other cells'); re-run them into another --out, or delete that file");
  }
}

}  // namespace pert

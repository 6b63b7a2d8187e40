// Test harness for tests/reference/blocks_test.py: GGML's block types through pert, on raw files.
//   pert_blocks dequantize TYPE IN_BLOCKS OUT_F32      blocks (any number of rows) to float32
//   pert_blocks quantize TYPE IN_F32 OUT_BLOCKS        float32 (a whole number of blocks) to blocks
//   pert_blocks matmul TYPE W_BLOCKS X_F32 T K N OUT_F32   y[T][N] = x[T][K] · W[N][K]ᵀ
// TYPE is GGML's name (Q4_K, q8_0, ...); floats are little-endian float32. Exit 0, or 1 with one
// line "pert_blocks: error: ..." on bad input.
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "pert/error.hpp"
#include "kernels/quants.hpp"

namespace {

using pert::Error;

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw Error(path + ": cannot read");
  return bytes;
}

void write_bytes(const std::string& path, const void* data, size_t size) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(data), std::streamsize(size));
  out.close();
  if (!out) throw Error(path + ": cannot write");
}

std::vector<float> read_floats(const std::string& path) {
  const std::vector<uint8_t> bytes = read_bytes(path);
  if (bytes.size() % 4) throw Error(path + ": " + std::to_string(bytes.size()) + " bytes is not a whole number of float32");
  std::vector<float> values(bytes.size() / 4);
  if (!bytes.empty()) std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

const pert::BlockTypeInfo& parse_type(const std::string& name) {
  std::string upper = name;
  for (char& c : upper) c = char(std::toupper(static_cast<unsigned char>(c)));
  for (uint32_t t = 0; t < 64; ++t)
    if (const pert::BlockTypeInfo* info = pert::block_type_info(t); info && upper == info->name) return *info;
  throw Error("unknown block type '" + name + "'");
}

int parse_count(const std::string& text, const char* what) {
  size_t used = 0;
  long v = -1;
  try {
    v = std::stol(text, &used);
  } catch (const std::exception&) {
  }
  if (used != text.size() || v <= 0 || v > (1L << 30)) throw Error(std::string(what) + " '" + text + "' is not a positive count");
  return int(v);
}

int run(int argc, char** argv) {
  const std::string usage =
      "usage: pert_blocks dequantize TYPE IN OUT | quantize TYPE IN OUT | matmul TYPE W X T K N OUT";
  if (argc < 2) throw Error(usage);
  const std::string command = argv[1];
  if (command == "dequantize" && argc == 5) {
    const pert::BlockTypeInfo& type = parse_type(argv[2]);
    const std::vector<uint8_t> blocks = read_bytes(argv[3]);
    if (blocks.size() % type.block_bytes)
      throw Error(std::string(argv[3]) + ": " + std::to_string(blocks.size()) + " bytes is not a whole number of " +
                  type.name + " blocks of " + std::to_string(type.block_bytes) + " bytes");
    std::vector<float> values(blocks.size() / type.block_bytes * size_t(type.block_size));
    pert::dequantize_row(type.type, blocks.data(), values.data(), int64_t(values.size()));
    write_bytes(argv[4], values.data(), values.size() * 4);
  } else if (command == "quantize" && argc == 5) {
    const pert::BlockTypeInfo& type = parse_type(argv[2]);
    const std::vector<float> values = read_floats(argv[3]);
    std::vector<uint8_t> blocks(pert::block_row_bytes(type.type, int64_t(values.size())));
    pert::quantize_row(type.type, values.data(), blocks.data(), int64_t(values.size()));
    write_bytes(argv[4], blocks.data(), blocks.size());
  } else if (command == "matmul" && argc == 9) {
    const pert::BlockTypeInfo& type = parse_type(argv[2]);
    const int T = parse_count(argv[5], "T"), K = parse_count(argv[6], "K"), N = parse_count(argv[7], "N");
    const size_t row = pert::block_row_bytes(type.type, K);
    const std::vector<uint8_t> w = read_bytes(argv[3]);
    const std::vector<float> x = read_floats(argv[4]);
    if (w.size() != row * size_t(N))
      throw Error(std::string(argv[3]) + ": " + std::to_string(w.size()) + " bytes, not " + std::to_string(N) +
                  " rows of " + std::to_string(row));
    if (x.size() != size_t(T) * size_t(K))
      throw Error(std::string(argv[4]) + ": " + std::to_string(x.size()) + " floats, not T·K = " +
                  std::to_string(size_t(T) * size_t(K)));
    std::vector<float> y(size_t(T) * size_t(N));
    const pert::BlockMatrix matrix{w.data(), type.type, row};
    pert::matmul_blocks(y.data(), x.data(), matrix, T, K, N);
    write_bytes(argv[8], y.data(), y.size() * 4);
  } else {
    throw Error(usage);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "pert_blocks: error: " << e.what() << "\n";
    return 1;
  }
}

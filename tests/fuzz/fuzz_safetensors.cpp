// Fuzzes the safetensors header and tensor table (pert::parse_safetensors): hostile lengths,
// JSON, dtypes, shapes and data_offsets must give a FormatError, and an accepted file's views
// must lie inside the buffer and tile its data area, which this harness re-checks and reads
// byte by byte (ASan catches any view that points outside).
#include <cstdint>
#include <string>

#include "fuzz_util.hpp"
#include "pert/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::expect_pert_errors("parse_safetensors", [&] {
    const pert::SafetensorsHeader h = pert::parse_safetensors(data, size, "fuzz.safetensors");
    const uint8_t* end = data + size;
    const uint8_t* cursor = nullptr;
    unsigned sum = 0;
    for (const pert::TensorView& t : h.tensors) {
      int64_t numel = 1;
      for (int64_t d : t.shape) numel *= d;
      fuzz::check(numel == t.numel, "numel of '" + t.name + "' is not the product of its shape");
      fuzz::check(t.nbytes == size_t(t.numel) * pert::dtype_size(t.dtype), "nbytes of '" + t.name + "' is wrong");
      fuzz::check(t.data >= data + 8 && t.data <= end && t.nbytes <= size_t(end - t.data),
                  "tensor '" + t.name + "' lies outside the buffer");
      fuzz::check(!cursor || t.data == cursor, "tensor '" + t.name + "' does not follow the previous one");
      cursor = t.data + t.nbytes;
      for (size_t i = 0; i < t.nbytes; ++i) sum += t.data[i];
      if (t.numel <= 4096) sum += unsigned(pert::read_f32(t).size());
      sum += unsigned(pert::shape_str(t.shape).size());
    }
    fuzz::check(h.tensors.empty() || cursor == end, "tensors do not reach the end of the data");
    for (const auto& [k, v] : h.metadata) sum += unsigned(k.size() + v.size());
    volatile unsigned sink = sum;
    (void)sink;
  });
  return 0;
}

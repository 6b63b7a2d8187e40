// Fuzzes the GGUF reader and what reads its metadata: the header (pert::parse_gguf: hostile
// counts, lengths, types, dims, offsets), the file's translation into a config and HF-named
// tensors (gguf_config_json, gguf_checkpoint) and its tokenizer (Tokenizer::from_gguf). Every
// failure must be a pert::Error; an accepted file's tensors must lie inside the buffer, which
// this harness re-checks and reads byte by byte (ASan catches a view that points outside).
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "fuzz_util.hpp"
#include "pert/config.hpp"
#include "pert/gguf.hpp"
#include "pert/gguf_model.hpp"
#include "pert/tokenizer.hpp"

namespace {

// The input as a file without touching the disk: GgufFile maps a path, as pert does.
struct MemoryFile {
  int fd = -1;
  explicit MemoryFile(const uint8_t* data, size_t size) {
    fd = ::memfd_create("fuzz.gguf", MFD_CLOEXEC);
    if (fd < 0) fuzz::fail("memfd_create failed");
    for (size_t done = 0; done < size;) {
      const ssize_t n = ::write(fd, data + done, size - done);
      if (n <= 0) fuzz::fail("write to memfd failed");
      done += size_t(n);
    }
  }
  ~MemoryFile() { ::close(fd); }
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd); }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  bool parsed = false;
  fuzz::expect_pert_errors("parse_gguf", [&] {
    const pert::GgufHeader h = pert::parse_gguf(data, size, "fuzz.gguf");
    parsed = true;
    unsigned sum = 0;
    for (const std::string& key : h.keys) {
      const pert::GgufValue& v = h.metadata.at(key);
      sum += unsigned(pert::gguf_value_text(v).size() + pert::gguf_value_json(v).dump().size());
      if (v.kind != pert::GgufKind::String && !(v.is_array() && v.element == pert::GgufKind::String))
        for (uint64_t i = 0; i < v.count; ++i) sum += unsigned(v.float_at(i) > 0) + unsigned(v.int_at(i));
    }
    for (const pert::GgufTensor& t : h.tensors) {
      if (!t.type) continue;
      fuzz::check(t.data >= data + h.data_offset && t.data <= data + size && t.nbytes <= size_t(data + size - t.data),
                  "tensor '" + t.name + "' lies outside the buffer");
      fuzz::check(t.shape[0] % t.type->block_size == 0, "tensor '" + t.name + "' has a partial block");
      for (size_t i = 0; i < t.nbytes; ++i) sum += t.data[i];
    }
    volatile unsigned sink = sum;
    (void)sink;
  });
  if (!parsed) return 0;
  const MemoryFile file(data, size);
  fuzz::expect_pert_errors("gguf model", [&] {
    auto gguf = std::make_shared<const pert::GgufFile>(file.path());
    const pert::ModelConfig config = pert::parse_model_config(pert::gguf_config_json(*gguf), "fuzz.gguf");
    const pert::Checkpoint checkpoint = pert::gguf_checkpoint(gguf, config);
    unsigned sum = 0;
    for (const auto& [name, view] : checkpoint.tensors())
      if (view->numel <= 4096) sum += unsigned(pert::read_f32(*view).size());
    volatile unsigned sink = sum;
    (void)sink;
  });
  fuzz::expect_pert_errors("gguf tokenizer", [&] {
    const pert::Tokenizer tok = pert::Tokenizer::from_gguf(pert::GgufFile(file.path()));
    std::vector<int> ids;
    if (fuzz::try_encode(tok, "Hello world, 123 \xe4\xbd\xa0\xe5\xa5\xbd!", ids)) fuzz::check_decoders(tok, ids);
  });
  return 0;
}

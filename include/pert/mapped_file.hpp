// A whole file mapped read-only (the weights' files: safetensors, GGUF). Opened without
// blocking, so a FIFO in its place fails instead of hanging, and refused unless regular.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace pert {

class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& path);  // IoError naming the file
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  const uint8_t* data() const;  // never null (an empty file maps to a static byte)
  size_t size() const { return size_; }

 private:
  std::string path_;
  void* map_ = nullptr;
  size_t size_ = 0;
};

}  // namespace pert

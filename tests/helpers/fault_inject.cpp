// A full disk for one directory, for tests that cannot mount a small tmpfs: loaded with
// LD_PRELOAD, it lets writes to files under $PERT_FAULT_DIR add up to $PERT_FAULT_BYTES bytes
// (default 0) and then fails them with ENOSPC, as a filesystem that has run out of room does
// (a write that crosses the limit is cut short there). Other files are written as usual. With
// $PERT_FAULT_DELAY_MS each of those writes first waits that long (a slow disk), so a test can
// signal a process in the middle of writing a file.
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

using WriteFn = ssize_t (*)(int, const void*, size_t);

WriteFn real_write() {
  static WriteFn fn = reinterpret_cast<WriteFn>(dlsym(RTLD_NEXT, "write"));
  return fn;
}

std::atomic<long long> written{0};

// Whether `fd` is a file under $PERT_FAULT_DIR.
bool watched(int fd) {
  const char* dir = std::getenv("PERT_FAULT_DIR");
  if (!dir || !*dir) return false;
  char link[64], target[4096];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, target, sizeof target - 1);
  if (n <= 0) return false;
  target[n] = '\0';
  const size_t len = std::strlen(dir);
  return std::strncmp(target, dir, len) == 0 && (target[len] == '/' || target[len] == '\0');
}

}  // namespace

extern "C" ssize_t write(int fd, const void* buf, size_t count) {
  if (!watched(fd)) return real_write()(fd, buf, count);
  if (const char* delay = std::getenv("PERT_FAULT_DELAY_MS")) usleep(useconds_t(std::atol(delay)) * 1000);
  const char* limit_text = std::getenv("PERT_FAULT_BYTES");
  const long long limit = limit_text ? std::atoll(limit_text) : 0;
  const long long room = limit - written.load();
  if (room <= 0) {
    errno = ENOSPC;
    return -1;
  }
  const ssize_t n = real_write()(fd, buf, count < size_t(room) ? count : size_t(room));
  if (n > 0) written += n;
  return n;
}

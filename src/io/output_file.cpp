#include "pert/output_file.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "pert/error.hpp"

namespace pert {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void cannot_write(const fs::path& path, int error) {
  throw IoError(path.string() + ": cannot write: " + std::strerror(error));
}

bool same_file(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

// 1 or 2 when `st` is the file this process's stdout or stderr is, else -1.
int standard_stream_of(const struct stat& st) {
  for (int fd : {1, 2}) {
    struct stat s {};
    if (::fstat(fd, &s) == 0 && same_file(s, st)) return fd;
  }
  return -1;
}

// All of `text` to `fd`; errno of the first failure, else 0.
int write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;
    text.remove_prefix(size_t(n));
  }
  return 0;
}

void write_stream(int fd, std::string_view text) {
  FILE* stream = fd == 1 ? stdout : stderr;
  if (std::fwrite(text.data(), 1, text.size(), stream) != text.size() || std::fflush(stream) != 0) {
    if (errno == EPIPE) throw BrokenPipe{};
    cannot_write(fd == 1 ? "stdout" : "stderr", errno);
  }
}

// A device, FIFO or the like, opened as it is (no O_CREAT: it exists) and written.
void write_in_place(const fs::path& path, std::string_view text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) cannot_write(path, errno);
  const int error = write_all(fd, text);
  const int closed = ::close(fd) == 0 ? 0 : errno;
  if (error || closed) cannot_write(path, error ? error : closed);
}

// The temporary file a signal must remove (any thread may take a process's signal: OpenMP's
// workers too, so blocking it on this thread would not do).
char pending_temporary[PATH_MAX];
std::atomic<bool> temporary_armed{false};

extern "C" void remove_temporary_and_die(int sig) {
  if (temporary_armed.load()) ::unlink(pending_temporary);  // async-signal-safe
  ::raise(sig);  // SA_RESETHAND: the default action, as if pert had not been here
}

// While it lives, SIGINT, SIGTERM and SIGHUP, where they would end pert (their default action),
// first remove `temporary`; a signal with a handler of its own or ignored is left alone.
class RemoveOnSignal {
 public:
  explicit RemoveOnSignal(const std::string& temporary) {
    if (temporary.size() >= sizeof pending_temporary) return;
    std::memcpy(pending_temporary, temporary.c_str(), temporary.size() + 1);
    temporary_armed.store(true);
    struct sigaction sa {};
    sa.sa_handler = remove_temporary_and_die;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND | SA_NODEFER;
    for (int i = 0; i < 3; ++i) {
      struct sigaction old {};
      installed_[i] = ::sigaction(kSignals[i], nullptr, &old) == 0 && old.sa_handler == SIG_DFL &&
                      ::sigaction(kSignals[i], &sa, nullptr) == 0;
    }
  }
  ~RemoveOnSignal() {
    for (int i = 0; i < 3; ++i)
      if (installed_[i]) ::signal(kSignals[i], SIG_DFL);
    temporary_armed.store(false);
  }
  RemoveOnSignal(const RemoveOnSignal&) = delete;
  RemoveOnSignal& operator=(const RemoveOnSignal&) = delete;

 private:
  static constexpr int kSignals[3] = {SIGINT, SIGTERM, SIGHUP};
  bool installed_[3] = {false, false, false};
};

// The process's umask, read without setting it (umask(2) cannot be read without a write, which
// another thread creating a file meanwhile would see).
mode_t umask_now() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  char line[256];
  unsigned mask = 0;
  bool found = false;
  while (f && !found && std::fgets(line, sizeof line, f)) found = std::sscanf(line, "Umask: %o", &mask) == 1;
  if (f) std::fclose(f);
  if (found) return mode_t(mask);
  const mode_t m = ::umask(022);  // no /proc: the only way there is
  ::umask(m);
  return m;
}

// A filesystem without permission bits (vfat, some FUSE mounts) refuses chmod: not a reason to
// fail a write.
bool chmod_unsupported(int error) { return error == EPERM || error == ENOTSUP || error == ENOSYS || error == EINVAL; }

// The directory a file is (to be) made in.
fs::path directory_of(const fs::path& file) { return file.parent_path().empty() ? fs::path(".") : file.parent_path(); }

// Where a link at `path` leads when write_file may follow it; "" with `refusal` set when it may
// not (another user's link, a link to nothing); `path` itself when it is no link or leads to a
// file written in place.
fs::path follow_link(const fs::path& path, std::string& refusal) {
  struct stat link {};
  if (::lstat(path.c_str(), &link) != 0 || !S_ISLNK(link.st_mode)) return path;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    refusal = "a link to nothing (" + std::string(std::strerror(errno)) + "); not followed";
    return {};
  }
  if (!S_ISREG(st.st_mode)) return path;  // written in place
  if (link.st_uid != ::geteuid() && link.st_uid != 0) {
    refusal = "a link owned by another user; not followed";
    return {};
  }
  std::error_code ec;
  const fs::path real = fs::canonical(path, ec);
  if (ec) refusal = ec.message();
  return real;
}

// `target` (a regular file or a new name) replaced by a complete temporary file.
void replace_atomically(const fs::path& target, std::string_view text) {
  const fs::path dir = directory_of(target);
  std::string name = (dir / ("." + target.filename().string() + ".XXXXXX")).string();
  struct stat old {};
  const bool existed = ::stat(target.c_str(), &old) == 0;
  // mkostemp creates with O_EXCL: a planted name (a link included) makes it try another.
  const int fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) cannot_write(target, errno);
  const RemoveOnSignal remove_on_signal(name);
  int error = 0;
  if (::fchmod(fd, existed ? (old.st_mode & 07777) : (0666 & ~umask_now())) != 0 && !chmod_unsupported(errno))
    error = errno;
  if (existed && ::geteuid() == 0) (void)!::fchown(fd, old.st_uid, old.st_gid);  // root keeps a user's file theirs
  if (!error) error = write_all(fd, text);
  if (!error && ::fsync(fd) != 0 && errno != EINVAL && errno != EROFS) error = errno;  // EINVAL: cannot sync, fine
  if (::close(fd) != 0 && !error) error = errno;  // NFS reports a full disk here
  if (!error && ::rename(name.c_str(), target.c_str()) != 0) error = errno;
  if (error) {
    ::unlink(name.c_str());
    cannot_write(target, error);
  }
}

}  // namespace

fs::path write_target(const fs::path& path) {
  std::string refusal;
  const fs::path target = follow_link(path, refusal);
  if (!refusal.empty()) throw IoError(path.string() + ": cannot write: " + refusal);
  return target;
}

void check_writable(const fs::path& path) {
  const std::string head = "cannot write " + path.string() + ": ";
  std::string refusal;
  const fs::path target = follow_link(path, refusal);
  if (!refusal.empty()) throw IoError(head + refusal);
  struct stat st {};
  const bool exists = ::stat(target.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode)) throw IoError(head + "it is a directory");
  if (exists && !S_ISREG(st.st_mode)) {  // written in place: its directory does not matter
    if (::access(target.c_str(), W_OK) != 0) throw IoError(head + "not writable");
    return;
  }
  const fs::path dir = directory_of(target);
  struct stat d {};
  if (::stat(dir.c_str(), &d) != 0) throw IoError(head + "directory " + dir.string() + " does not exist");
  if (!S_ISDIR(d.st_mode)) throw IoError(head + dir.string() + " is not a directory");
  if (::access(dir.c_str(), W_OK | X_OK) != 0) throw IoError(head + "directory " + dir.string() + " is not writable");
  if (exists && ::access(target.c_str(), W_OK) != 0) throw IoError(head + "not writable");
  const uid_t me = ::geteuid();
  if (exists && (d.st_mode & S_ISVTX) && me != 0 && st.st_uid != me && d.st_uid != me)
    throw IoError(head + "another user's file in a sticky directory (" + dir.string() + "), which only they can replace");
}

void write_file(const fs::path& path, std::string_view text) {
  if (path == "-") return write_stream(1, text);
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (const int fd = standard_stream_of(st); fd > 0) return write_stream(fd, text);
    if (S_ISDIR(st.st_mode)) throw IoError(path.string() + ": cannot write: is a directory");
    if (!S_ISREG(st.st_mode)) return write_in_place(path, text);
  }
  replace_atomically(write_target(path), text);
}

FileLock::FileLock(const fs::path& path) {
  const fs::path lock = write_target(path).string() + ".lock";
  fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0666);
  if (fd_ < 0) {
    const int error = errno;
    throw IoError(lock.string() + ": cannot lock: " +
                  (error == ELOOP ? std::string("a link; not followed") : std::strerror(error)));
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw IoError(lock.string() + ": cannot lock: not a regular file");
  }
  struct flock whole {};
  whole.l_type = F_WRLCK;
  whole.l_whence = SEEK_SET;
  int rc;
  while ((rc = ::fcntl(fd_, F_SETLKW, &whole)) != 0 && errno == EINTR) {
  }
  if (rc != 0) {
    const int error = errno;
    if (error == ENOLCK || error == EOPNOTSUPP || error == ENOSYS) {  // no locks on this filesystem
      unlocked_ = lock.string() + ": cannot lock (" + std::strerror(error) + ")";
      return;
    }
    ::close(fd_);
    throw IoError(lock.string() + ": cannot lock: " + std::strerror(error));
  }
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the lock
}

FileLock::FileLock(FileLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)), unlocked_(std::move(other.unlocked_)) {}

void check_distinct_paths(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs) {
  // What identifies a file: its inode when it exists, else its canonical name; empty: exempt.
  auto identity = [](const fs::path& p) -> std::string {
    if (p.empty() || p == "-") return "";
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0)
      return S_ISREG(st.st_mode) ? std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) : "";
    std::error_code ec;
    return "new:" + fs::weakly_canonical(p, ec).string();
  };
  std::vector<std::string> ids;
  for (const NamedPath& o : outputs) ids.push_back(identity(o.path));
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (ids[i].empty()) continue;
    for (size_t j = 0; j < i; ++j)
      if (ids[j] == ids[i])
        throw Error(outputs[j].what + " and " + outputs[i].what + " name the same file " + outputs[i].path.string() +
                    "; give each output its own file");
    for (const NamedPath& in : inputs)
      if (identity(in.path) == ids[i])
        throw Error(outputs[i].what + " " + outputs[i].path.string() + " is the " + in.what +
                    " input; writing it would replace what is read; give another file");
  }
}

namespace {
int stdout_error = 0;  // why a write to stdout failed, as first seen
}

bool stdout_failed() {
  const bool failed = std::ferror(stdout) != 0;
  if (failed && !stdout_error) stdout_error = errno ? errno : EIO;  // called right after the write
  return failed;
}

// Whether stdout is a pipe or socket whose reader has gone (poll says POLLERR): the errno of an
// earlier failed write may be long overwritten.
bool reader_gone() {
  struct pollfd p {1, POLLOUT, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLERR);
}

void finish_stdout() {
  const bool failed_before = stdout_failed();
  std::clearerr(stdout);
  errno = 0;
  if (std::fflush(stdout) != 0) stdout_error = errno ? errno : EIO;  // what is buffered, or tried again
  else if (!failed_before) return;
  if (stdout_error == EPIPE || reader_gone()) throw BrokenPipe{};
  throw IoError("stdout: cannot write: " + std::string(std::strerror(stdout_error ? stdout_error : EIO)));
}

}  // namespace pert

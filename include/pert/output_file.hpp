// Output files that are never half-written, never written through a name someone else planted,
// and never shared by two writers unawares. Every file pert writes (JSON, CSV, dumps) goes
// through write_file; writers of one file that merge into it hold its FileLock.
#pragma once
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace pert {

// Writes `text` to `path` as a whole. Where it lands:
//   "-", or the file this process's stdout or stderr is (/dev/stdout, a link to /proc/self/fd/1,
//       the file stdout is redirected to): written to that stream, flushed.
//   an existing file that is not a regular file (a device such as /dev/null, a FIFO): written in
//       place; it is never replaced by a regular file.
//   a new name or a regular file: a temporary file is made in the same directory with exclusive
//       creation (a name planted there, a link included, is never followed), written, synced and
//       renamed over `path`. On any failure (a full disk, a read-only directory) the old file is left
//       as it was and the temporary file is removed. SIGINT, SIGTERM and SIGHUP that end pert
//       meanwhile remove it first (only SIGKILL can leave a .NAME.XXXXXX file behind).
//   a link to a regular file: the file it leads to is replaced as above (the link stays), when
//       the link is the caller's own or root's; a link of another user is not followed (as the
//       kernel's protected_symlinks), nor is a link to nothing.
// An existing file keeps its permission bits; a new one gets 0666 less the umask.
// Throws IoError "PATH: cannot write: REASON".
void write_file(const std::filesystem::path& path, std::string_view text);

// What can be known before any work of whether write_file(path) will succeed, checked where it
// will write: a link is resolved as write_file resolves it; a device, FIFO or stdout must be
// writable itself; a file to be replaced needs a directory that exists and can be written, and
// (in a sticky directory such as /tmp) must be the caller's. IoError "cannot write PATH: REASON".
void check_writable(const std::filesystem::path& path);

// The file write_file(path) would replace: `path`, or where a link at `path` leads. Throws as
// write_file does for a link it would not follow.
std::filesystem::path write_target(const std::filesystem::path& path);

// An exclusive lock on `path`'s companion lock file, PATH.lock (made beside the file write_file
// replaces, never through a link), held until destroyed: writers that re-read, merge and replace
// one file one at a time. POSIX record locks (fcntl), which NFS and Lustre share between
// machines. The lock file stays after use (removing it would race with the next writer). A
// filesystem that has no locks at all (ENOLCK, an NFS mount without lockd) leaves the file
// unlocked and says why in unlocked(), for the front end to warn that writers must not share it.
class FileLock {
 public:
  explicit FileLock(const std::filesystem::path& path);
  ~FileLock();
  FileLock(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  const std::string& unlocked() const { return unlocked_; }  // "" when the lock is held

 private:
  int fd_ = -1;
  std::string unlocked_;
};

// A path as a front end names it: `what` is its flag or keyword ("--out", "csv=").
struct NamedPath {
  std::string what;
  std::filesystem::path path;
};

// Throws Error when two of `outputs`, or an output and one of `inputs`, are the same file (the
// same inode, or the same canonical path for names that do not exist yet): "--out and --csv
// name the same file r.json". "-" and outputs that are not regular files (/dev/null twice) pass.
// Run it before any work, so a run never writes one result over another or over its input.
void check_distinct_paths(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs = {});

// Finishes standard output: flushes it and throws IoError "stdout: cannot write: REASON" when any
// write to it failed (a full disk, /dev/full). A closed pipe (EPIPE) is not reported: it throws
// BrokenPipe, which a front end ends on quietly.
void finish_stdout();
// True once a write to stdout has failed (e.g. to stop a long stream early).
bool stdout_failed();
struct BrokenPipe {};

}  // namespace pert

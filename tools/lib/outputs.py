"""Output files written whole or not at all, by the rules pert's own follow (include/pert/
output_file.hpp; docs/robustness.md):

- a new name or a regular file: written to a temporary file made beside it with exclusive creation
  (a name planted there, a link included, is never followed), synced, then renamed over it; on
  any error the old file is as it was and the temporary file is gone; an existing file keeps its
  permission bits;
- the file stdout or stderr is (/dev/stdout, a link to /proc/self/fd/1): written to that stream;
- an existing device, FIFO or the like (/dev/null): written in place, never replaced;
- a link to a regular file: the file it leads to is replaced (the link stays) when the link is
  the caller's or root's; another user's link, or a link to nothing, is an error.

    with replaced("out.json") as f:
        json.dump(result, f)
    with replaced("plot.png", "wb") as f:
        fig.savefig(f, format="png")
"""
import contextlib
import errno
import os
import shutil
import stat
import sys
import tempfile


def target(path):
    """The file replaced(path) writes: path, or where the caller's link at path leads."""
    try:
        link = os.lstat(path)
    except FileNotFoundError:
        return path
    if not stat.S_ISLNK(link.st_mode):
        return path
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise OSError(f"{path}: cannot write: a link to nothing; not followed") from None
    if not stat.S_ISREG(st.st_mode):
        return path
    if link.st_uid not in (os.geteuid(), 0):
        raise OSError(f"{path}: cannot write: a link owned by another user; not followed")
    return os.path.realpath(path)


def _umask():
    """The umask, read without setting it where /proc tells it (another thread may be creating a file)."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1], 8) for line in f if line.startswith("Umask:"))
    except (OSError, StopIteration, ValueError):
        mask = os.umask(0o022)
        os.umask(mask)
        return mask


def _standard_stream(st):
    """1 or 2 when `st` is the file stdout or stderr is, else None."""
    for fd in (1, 2):
        try:
            if os.path.samestat(st, os.fstat(fd)):
                return fd
        except OSError:  # closed
            pass
    return None


@contextlib.contextmanager
def replaced(path, mode="w", **open_args):
    """A file object whose content replaces `path` when the block ends without an error."""
    path = os.fspath(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    stream = _standard_stream(st) if st is not None else None
    if stream is not None:  # stdout's or stderr's file (/dev/stdout, a link to it): written there, in order
        (sys.stdout if stream == 1 else sys.stderr).flush()
        with os.fdopen(os.dup(stream), mode, **open_args) as f:
            yield f
        return
    if st is not None and not stat.S_ISREG(st.st_mode):  # a device or FIFO: in place
        with open(path, mode, **open_args) as f:
            yield f
        return
    real = target(path)
    folder, name = os.path.split(os.path.abspath(real))
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=folder)  # O_EXCL: nothing planted is followed
    try:
        try:
            os.fchmod(fd, stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask())
            if st is not None and os.geteuid() == 0:
                os.fchown(fd, st.st_uid, st.st_gid)  # root keeps a user's file theirs
        except OSError as e:
            if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.ENOSYS, errno.EINVAL):  # no permission bits here
                raise
        f = os.fdopen(fd, mode, **open_args)
        fd = None  # the file object owns it now
        with f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, real)
    except BaseException:
        if fd is not None:
            os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def copy(src, dst):
    """shutil.copyfile(src, dst) through replaced(): dst whole or not at all, never through a
    link planted there."""
    with open(src, "rb") as f, replaced(dst, "wb") as out:
        shutil.copyfileobj(f, out)


def save_figure(fig, path, **savefig_args):
    """fig.savefig(path) through replaced(), the format from the name's extension."""
    with replaced(path, "wb") as f:
        fig.savefig(f, format=os.path.splitext(os.fspath(path))[1].lstrip(".") or "png", **savefig_args)


def main():
    import argparse
    ap = argparse.ArgumentParser(description="Writes standard input to FILE whole or not at all: to a temporary file "
                                             "beside it, renamed over it when complete (devices and stdout in place). "
                                             "For shell scripts: COMMAND | tools/lib/outputs.py result.txt")
    ap.add_argument("file", metavar="FILE", help="the file to write")
    a = ap.parse_args()
    try:
        with replaced(a.file, "wb") as f:
            shutil.copyfileobj(sys.stdin.buffer, f)
    except OSError as e:
        sys.exit(f"outputs.py: {a.file}: cannot write: {e.strerror or e}")


if __name__ == "__main__":
    main()

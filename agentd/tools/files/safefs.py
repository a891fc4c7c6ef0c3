"""File access that cannot be redirected outside the workspace or blocked (R-T5, R-X4).

`resolve_in_workspace` checks a path once; between that check and the I/O a directory
could be swapped for a symlink to elsewhere, and a FIFO or device would block a reader
forever. So the I/O itself never follows a symlink: it walks from a descriptor of the
workspace root, one component at a time with `O_NOFOLLOW` (`openat`), opens files with
`O_NONBLOCK`, and checks the opened descriptor with `fstat`:

- only regular files are read or written (FIFOs, sockets and devices are refused);
- a regular file with more than one hard link is refused: its other name may be outside
  the workspace, and writing or reading through it would reach that outside file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

from agentd.tools.errors import ToolError
from agentd.tools.files.workspace import _realpath

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def refusal(st: os.stat_result, disp: str) -> str | None:
    """Why a file with this status must not be read or written through, or None."""
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        return f"{disp} is a directory, not a file"
    if not stat.S_ISREG(mode):
        kind = (
            "a named pipe (FIFO)"
            if stat.S_ISFIFO(mode)
            else "a socket"
            if stat.S_ISSOCK(mode)
            else "a device"
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a symbolic link"
            if stat.S_ISLNK(mode)
            else "not a regular file"
        )
        return f"{disp} is {kind}; only regular files can be read or written"
    if st.st_nlink > 1:
        return (
            f"{disp} has {st.st_nlink} hard links; a hard-linked file may be the same file as one "
            "outside the workspace, so it is not read or written through. Copy it to a new file instead"
        )
    return None


def check_fd(fd: int, disp: str) -> os.stat_result:
    st = os.fstat(fd)
    why = refusal(st, disp)
    if why is not None:
        raise ToolError(why)
    return st


def _parts(root: Path, path: Path) -> tuple[str, list[str]]:
    """(the root's realpath, `path`'s components below it) — `Path(root).resolve()` and
    `Path(path).relative_to(…).parts` on strings (issue 32: pathlib's objects cost more than
    the realpath itself, on the tool's thread once per call)."""
    real_root = _realpath(root)
    text = str(path)  # pathlib's normal form: no `.`, no empty or trailing component
    if text == real_root:
        return real_root, []
    prefix = real_root if real_root.endswith("/") else real_root + "/"
    if not text.startswith(prefix):
        raise ToolError(f"{path} is outside the workspace {real_root}")
    return real_root, text[len(prefix) :].split("/")


def _is_link(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _moved(disp: str) -> ToolError:
    return ToolError(
        f"{disp}: a directory on its path is a symbolic link or was replaced while the call ran; "
        "access refused (paths are resolved once and never re-followed)"
    )


@contextlib.contextmanager
def parent_dir(root: Path, path: Path, disp: str, *, create: bool = False) -> Iterator[tuple[int, str]]:
    """(descriptor of `path`'s directory, its final name), reached from the workspace root
    without following any symlink; with `create`, missing directories are made."""
    real_root, parts = _parts(root, path)
    if not parts:
        raise ToolError(f"{disp} is the workspace directory, not a file")
    fd = os.open(real_root, _DIR_FLAGS)
    try:
        for name in parts[:-1]:
            try:
                nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o777, dir_fd=fd)
                nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(fd, name):
                    raise _moved(disp) from None
                raise  # e.g. ENOTDIR for a plain file on the path: "Not a directory"
            os.close(fd)
            fd = nxt
        yield fd, parts[-1]
    finally:
        os.close(fd)


def open_for_read(dir_fd: int, name: str, disp: str) -> int:
    """A descriptor for reading regular file `name`; refuses symlinks, FIFOs, hard links."""
    try:
        fd = os.open(name, READ_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # the final component is (now) a symlink
            raise _moved(disp) from None
        raise
    try:
        check_fd(fd, disp)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_existing(dir_fd: int, name: str, disp: str) -> bytes | None:
    """The whole content of `name`, or None if it does not exist."""
    try:
        fd = open_for_read(dir_fd, name, disp)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as f:
        return f.read()


def replace_atomically(dir_fd: int, name: str, disp: str, data: bytes) -> None:
    """Write via a temp file in the same directory + rename, so readers (and a crash) see
    the old or the new content, never a partial file. An existing `name` must pass the
    same checks as a read (no symlink, FIFO or hard-linked file is replaced)."""
    try:
        st: os.stat_result | None = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        st = None
    if st is not None:
        why = refusal(st, disp)
        if why is not None:
            raise ToolError(why)
    # Truncated name keeps the temp name under NAME_MAX; the random part avoids collisions.
    tmp = f".{name[:100]}.{secrets.token_hex(6)}.tmp"
    # 0o666 lets the umask decide a new file's mode, as a plain open() would.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, 0o666, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
            if st is not None:  # keep an existing file's permissions (e.g. executable scripts)
                os.fchmod(f.fileno(), stat.S_IMODE(st.st_mode))
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise

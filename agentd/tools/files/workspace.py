"""Workspace confinement for tools (R-T5, R-X4).

Every path a tool touches goes through `resolve_in_workspace`, which follows symlinks
before checking containment, so neither `..`, an absolute path, nor a symlink (to a file
or a directory, existing or dangling) can lead outside the session's workspace root.

This is a check at resolve time; the file tools' I/O then goes through
`agentd.tools.files.safefs`, which reaches the resolved path from a descriptor of the root
without following any symlink, so a link swapped in after the check is refused.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from agentd.tools.errors import ToolError

# `AGENTD_WORKSPACE_RESOLVE=pathlib`: resolve with `Path.resolve` and `is_relative_to` (the
# library path). By default the same `os.path.realpath` that `Path.resolve` calls works on
# strings: a file tool call resolves a path two or three times on the event loop, and
# pathlib's objects around each realpath cost several times the realpath itself.
LIBRARY_RESOLVE = os.environ.get("AGENTD_WORKSPACE_RESOLVE", "").strip().lower() == "pathlib"


def resolve_in_workspace(root: Path, path: str) -> Path:
    """Resolve `path` (relative to `root`, or absolute) and refuse anything outside `root`.

    Symlinks are followed; for a path that does not exist yet, the existing part is
    resolved and the rest appended (what `Path.resolve(strict=False)` does).
    """
    if not isinstance(path, str) or not path.strip():
        raise ToolError("path must be a non-empty string")
    if LIBRARY_RESOLVE:
        return _resolve_pathlib(root, path)
    return Path(_resolve_str(root, path)[0])


def resolve_and_display(root: Path, path: str) -> tuple[Path, str]:
    """`(p := resolve_in_workspace(root, path), display_path(root, p))` with the root's
    realpath made once, not twice (a file tool's call wants both)."""
    if not isinstance(path, str) or not path.strip():
        raise ToolError("path must be a non-empty string")
    if LIBRARY_RESOLVE:
        resolved_path = _resolve_pathlib(root, path)
        return resolved_path, display_path(root, resolved_path)
    resolved, real_root = _resolve_str(root, path)
    # (a realpath is already pathlib's normal form: `display_path`'s text, without a Path)
    if resolved == real_root:
        return Path(resolved), "."
    prefix = real_root if real_root.endswith("/") else real_root + "/"
    return Path(resolved), resolved[len(prefix) :]  # inside the root: `_within` said so


def _resolve_str(root: Path, path: str) -> tuple[str, str]:
    """(the path's realpath, the root's), refused unless the first is inside the second."""
    try:
        real_root = _realpath(root)
        resolved = _realpath(path) if path.startswith("/") else _realpath_below(real_root, path)
    except RuntimeError as exc:  # a symlink loop, reported as Python 3.11's pathlib does
        raise ToolError(f"cannot resolve {path!r}: {exc}") from exc
    except (OSError, ValueError) as exc:  # ValueError: embedded NUL byte
        raise ToolError(f"invalid path {path!r}: {exc}") from exc
    if not _within(resolved, real_root):
        raise ToolError(
            f"path {path!r} resolves to {resolved}, which is outside the workspace {real_root}; "
            "only files inside the workspace can be accessed"
        )
    return resolved, real_root


def _realpath(path: str | Path) -> str:
    """`str(Path(path).resolve(strict=False))` (Python 3.11): realpath, then a stat that
    turns a symlink loop (which realpath leaves in place) into a `RuntimeError`."""
    resolved = os.path.realpath(path)
    try:
        os.stat(resolved)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise RuntimeError(f"Symlink loop from {exc.filename!r}") from None
    return resolved


def _realpath_below(real_root: str, path: str) -> str:
    """`_realpath(os.path.join(real_root, path))` for a relative `path` and a realpath
    `real_root`: the root's own components are not walked again (realpath lstats each of
    them: most of a file tool call's resolve). Only `path`'s components are looked at; one
    that is a symlink, or a `..`, takes the whole realpath (their meaning is realpath's).
    A missing component and those after it are appended as they are, as realpath does.
    With no symlink met, the final stat's symlink-loop check has nothing to find."""
    resolved = real_root
    for name in path.split("/"):
        if not name or name == ".":
            continue
        if name == "..":
            return _realpath(os.path.join(real_root, path))
        step = f"{resolved}/{name}" if resolved != "/" else f"/{name}"
        try:
            is_link = stat.S_ISLNK(os.lstat(step).st_mode)
        except OSError:  # missing, or not a directory on the way: realpath goes on as text
            is_link = False
        if is_link:
            return _realpath(os.path.join(real_root, path))
        resolved = step
    return resolved


def _within(resolved: str, real_root: str) -> bool:
    """`Path(resolved).is_relative_to(real_root)` for two realpaths (absolute, normalised)."""
    if resolved == real_root:
        return True
    return resolved.startswith(real_root if real_root.endswith("/") else real_root + "/")


def _resolve_pathlib(root: Path, path: str) -> Path:
    try:
        real_root = Path(root).resolve(strict=False)
        candidate = Path(path)
        if not candidate.is_absolute():
            candidate = real_root / candidate
        resolved = candidate.resolve(strict=False)
    except RuntimeError as exc:  # Python 3.11 reports symlink loops this way
        raise ToolError(f"cannot resolve {path!r}: {exc}") from exc
    except (OSError, ValueError) as exc:  # ValueError: embedded NUL byte
        raise ToolError(f"invalid path {path!r}: {exc}") from exc
    if not resolved.is_relative_to(real_root):
        raise ToolError(
            f"path {path!r} resolves to {resolved}, which is outside the workspace {real_root}; "
            "only files inside the workspace can be accessed"
        )
    return resolved


def display_path(root: Path, p: Path) -> str:
    """`p` relative to the workspace root for messages ("." for the root itself)."""
    if LIBRARY_RESOLVE:
        try:
            rel = Path(p).relative_to(Path(root).resolve(strict=False))
        except ValueError:
            return str(p)
        return str(rel) if rel.parts else "."
    real_root = _realpath(root)
    text = str(p) if isinstance(p, Path) else str(Path(p))  # pathlib's normal form
    if text == real_root:
        return "."
    prefix = real_root if real_root.endswith("/") else real_root + "/"
    return text[len(prefix) :] if text.startswith(prefix) else str(p)

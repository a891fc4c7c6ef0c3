"""Workspace confinement for tools (R-T5, R-X4).

Every path a tool touches goes through `resolve_in_workspace`, which follows symlinks
before checking containment, so neither `..`, an absolute path, nor a symlink (to a file
or a directory, existing or dangling) can lead outside the session's workspace root.

This is a check at resolve time; the file tools' I/O then goes through
`agentd.tools.files.safefs`, which reaches the resolved path from a descriptor of the root
without following any symlink, so a link swapped in after the check is refused.
"""

from __future__ import annotations

from pathlib import Path

from agentd.tools.errors import ToolError


def resolve_in_workspace(root: Path, path: str) -> Path:
    """Resolve `path` (relative to `root`, or absolute) and refuse anything outside `root`.

    Symlinks are followed; for a path that does not exist yet, the existing part is
    resolved and the rest appended (what `Path.resolve(strict=False)` does).
    """
    if not isinstance(path, str) or not path.strip():
        raise ToolError("path must be a non-empty string")
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
    try:
        rel = Path(p).relative_to(Path(root).resolve(strict=False))
    except ValueError:
        return str(p)
    return str(rel) if rel.parts else "."

"""Git's ignore rules for a workspace, so `glob`, `grep` and `list_dir` skip what git skips
(vendored dependencies, virtualenvs, build output), like ripgrep does.

Rules come from, lowest precedence first: the global excludes file (git's `core.excludesFile`,
else `$XDG_CONFIG_HOME/git/ignore` or `~/.config/git/ignore`), `.git/info/exclude`, and every
`.gitignore` from the repository's top down to the file's directory (a deeper file overrides a
shallower one; within a file the last matching pattern wins, `!` re-includes). The repository
top is the nearest directory at or above the workspace root holding `.git`; without one the
workspace root is the top. Matching is pathspec's `GitIgnoreSpec` (git's wildmatch rules).

A path below an ignored directory is ignored too: callers never descend into one.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pathspec (~30 modules) loads with the first walk, not at start-up
    from pathspec import GitIgnoreSpec

MAX_IGNORE_FILE_BYTES = 1024 * 1024  # a hostile giant .gitignore is read only this far

_Chain = tuple[tuple[str, "GitIgnoreSpec"], ...]  # (dir prefix relative to top, its rules), shallow first


def _read_spec(path: Path) -> GitIgnoreSpec | None:
    from pathspec import GitIgnoreSpec

    try:
        with open(path, "rb") as f:  # one bounded read
            data = f.read(MAX_IGNORE_FILE_BYTES)
    except OSError:
        return None
    lines = data.decode("utf-8", errors="replace").splitlines()
    try:
        spec = GitIgnoreSpec.from_lines(lines)
    except ValueError:  # pathspec rejects a few malformed patterns; git ignores them too
        spec = GitIgnoreSpec.from_lines([ln for ln in lines if _valid(ln)])
    return spec if spec.patterns else None


def _valid(line: str) -> bool:
    from pathspec import GitIgnoreSpec

    try:
        GitIgnoreSpec.from_lines([line])
    except ValueError:
        return False
    return True


def find_top(root: Path) -> Path:
    """The repository top: the nearest directory at or above `root` holding `.git`."""
    for d in (root, *root.parents):
        if (d / ".git").exists():
            return d
    return root


def git_dir(top: Path) -> Path | None:
    """The git directory of `top` (a worktree's `.git` file names it; its common dir holds info/)."""
    dot = top / ".git"
    if dot.is_dir():
        return dot
    try:
        text = dot.read_text(errors="replace")[:4096]
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    gd = (top / text[len("gitdir:") :].strip()).resolve()
    try:
        common = (gd / "commondir").read_text(errors="replace").strip()
    except OSError:
        return gd
    return (gd / common).resolve()


def _config_excludes_file(config: Path) -> str | None:
    """`core.excludesFile` from one git config file (a minimal reader: enough for this key)."""
    try:
        text = config.read_text(errors="replace")[:MAX_IGNORE_FILE_BYTES]
    except OSError:
        return None
    section = ""
    found: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("["):
            section = line.strip("[]").strip().lower()
            continue
        key, sep, value = line.partition("=")
        if sep and section == "core" and key.strip().lower() == "excludesfile":
            found = value.strip().strip('"')
    return found


def global_excludes_path() -> Path | None:
    home = os.environ.get("HOME") or str(Path.home())
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    configured: str | None = None
    for config in (Path(xdg) / "git" / "config", Path(home) / ".gitconfig"):  # later wins, as in git
        value = _config_excludes_file(config)
        if value:
            configured = value
    if configured:
        if configured.startswith("~/"):
            configured = os.path.join(home, configured[2:])
        return Path(configured)
    return Path(xdg) / "git" / "ignore"


class IgnoreRules:
    """Whether a path below `root` (the workspace, symlinks resolved) is ignored."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.top = find_top(root)
        # Where `root` sits below the top ("" when it is the top), with a trailing "/".
        rel = root.relative_to(self.top).as_posix()
        self._root_prefix = "" if rel == "." else rel + "/"
        base: list[tuple[str, GitIgnoreSpec]] = []
        glob_path = global_excludes_path()
        for path in (glob_path, self._exclude_path()):
            spec = _read_spec(path) if path is not None else None
            if spec is not None:
                base.append(("", spec))
        self._base: _Chain = tuple(base)  # applied after every .gitignore
        self._chains: dict[str, _Chain] = {}  # dir relative to top -> .gitignore chain
        self._chains[""] = self._with_own("", ())
        # The chain of `root` itself: the .gitignore files between the top and the workspace.
        chain = self._chains[""]
        parts = [p for p in self._root_prefix.split("/") if p]
        for i in range(len(parts)):
            d = "/".join(parts[: i + 1])
            chain = self._with_own(d, chain)
            self._chains[d] = chain

    def _exclude_path(self) -> Path | None:
        gd = git_dir(self.top)
        return gd / "info" / "exclude" if gd is not None else None

    def _with_own(self, d: str, parent: _Chain) -> _Chain:
        spec = _read_spec(self.top / d / ".gitignore" if d else self.top / ".gitignore")
        return parent if spec is None else (*parent, (d + "/" if d else "", spec))

    def _chain(self, d: str) -> _Chain:
        """The .gitignore chain that applies inside directory `d` (relative to top)."""
        chain = self._chains.get(d)
        if chain is None:
            parent = d.rpartition("/")[0]
            chain = self._with_own(d, self._chain(parent))
            if len(self._chains) < 100_000:  # bounded: a walk visits each directory once
                self._chains[d] = chain
        return chain

    def ignored(self, rel: str, is_dir: bool) -> bool:
        """Whether `rel` (relative to the workspace root, '/'-separated) is ignored, assuming
        its parent directories are not (the walk never enters an ignored directory)."""
        path = self._root_prefix + rel
        parent = path.rpartition("/")[0]
        probe = path + "/" if is_dir else path
        for prefix, spec in reversed(self._chain(parent)):
            verdict = spec.check_file(probe[len(prefix) :]).include
            if verdict is not None:
                return verdict
        for _prefix, spec in reversed(self._base):
            verdict = spec.check_file(probe).include
            if verdict is not None:
                return verdict
        return False

    def path_ignored(self, rel: str, is_dir: bool) -> bool:
        """Whether `rel` or any directory above it (below the workspace root) is ignored: for a
        path the caller named explicitly, e.g. `.venv/lib`."""
        parts = [p for p in rel.split("/") if p and p != "."]
        for i in range(len(parts)):
            last = i == len(parts) - 1
            if self.ignored("/".join(parts[: i + 1]), is_dir=is_dir if last else True):
                return True
        return False

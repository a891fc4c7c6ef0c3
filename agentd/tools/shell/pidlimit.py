"""A pids cgroup per sandboxed command: the process limit that also binds root.

The kernel does not apply `RLIMIT_NPROC` to uid 0, so a server running as root (a
container, CI) could not stop a fork bomb with rlimits alone. Where the pids controller
can be used (cgroup v1's `pids` hierarchy, or v2 with `pids` enabled for our cgroup's
children) each command gets a child cgroup `agentd-<tag>` with `pids.max`, entered
before the sandbox starts (`agentd.tools.shell.sandbox.in_cgroup`) and removed when the
command has ended. Elsewhere (no cgroupfs, not writable) this finds nothing and the
rlimit stays the only bound, which does apply to the usual non-root server.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

CGROUP_FS = Path("/sys/fs/cgroup")
PREFIX = "agentd-"


def _own_paths(proc_cgroup: str) -> tuple[str | None, str | None]:
    """(v1 pids path, v2 path) of this process, from /proc/self/cgroup's text."""
    v1 = v2 = None
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            v2 = path
        elif "pids" in controllers.split(","):
            v1 = path
    return v1, v2


def _usable(parent: Path) -> bool:
    """Can a child with a pids limit be made here? Tried for real: permissions on cgroupfs
    (read-only mounts, delegation) are not knowable from the mode bits."""
    probe = parent / f"{PREFIX}{os.getpid()}-probe"
    try:
        probe.mkdir()
    except FileExistsError:
        pass
    except OSError:
        return False
    try:
        (probe / "pids.max").write_text("1\n")
        return True
    except OSError:
        return False
    finally:
        with contextlib.suppress(OSError):
            probe.rmdir()


def find_parent(root: Path = CGROUP_FS) -> Path | None:
    """A cgroup directory in which per-command pids cgroups can be made, or None."""
    try:
        v1, v2 = _own_paths(Path("/proc/self/cgroup").read_text())
    except OSError:
        return None
    candidates: list[Path] = []
    if v1 is not None:
        candidates.append(root / "pids" / v1.lstrip("/"))
    if v2 is not None:
        for base in (root / v2.lstrip("/"), root / "unified" / v2.lstrip("/")):
            try:
                if "pids" in (base / "cgroup.subtree_control").read_text().split():
                    candidates.append(base)
            except OSError:
                continue
    for parent in candidates:
        if parent.is_dir() and _usable(parent):
            sweep(parent)
            return parent
    return None


def sweep(parent: Path) -> None:
    """Remove empty cgroups left by an earlier run (a crash between start and cleanup).
    Only those whose owner — the server process named in them — is gone: other agentd
    servers share this parent (replicas, test workers), and their freshly made cgroup is
    empty until its command enters it."""
    with contextlib.suppress(OSError):
        for child in parent.iterdir():
            if child.name.startswith(PREFIX) and not _owner_alive(child.name):
                with contextlib.suppress(OSError):
                    child.rmdir()  # fails, as it should, while processes remain in it


def _owner_alive(name: str) -> bool:
    owner = name.removeprefix(PREFIX).split("-", 1)[0]
    if not owner.isdigit():
        return False  # an older run's name without an owner: a leftover
    try:
        os.kill(int(owner), 0)
    except PermissionError:
        return True  # alive, just not ours to signal
    except (ProcessLookupError, OverflowError):  # gone, or no pid at all
        return False
    return True


def create(parent: Path, tag: str, max_pids: int) -> Path:
    """A new cgroup limited to `max_pids` processes; returns its `cgroup.procs` file."""
    group = parent / f"{PREFIX}{os.getpid()}-{tag}"  # the owner's pid: see `sweep`
    group.mkdir()
    try:
        (group / "pids.max").write_text(f"{max_pids}\n")
    except OSError:
        with contextlib.suppress(OSError):
            group.rmdir()
        raise
    return group / "cgroup.procs"


def remove(procs_file: Path) -> bool:
    """Remove the command's cgroup once it is empty; False while processes remain in it."""
    group = procs_file.parent
    try:
        group.rmdir()
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.debug("pids cgroup %s not removed yet: %s", group, exc)
        return False
    return True

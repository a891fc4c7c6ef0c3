"""The OS sandbox of shell commands (issue 13): pure decisions, no I/O.

On Linux `bash` runs under bubblewrap, as Codex does: the whole file system read-only,
the session's workspace writable, a private /tmp, `$AGENTD_HOME`, the database file and
the root of every session's workspaces hidden behind empty tmpfs (the session's own
workspace is bound back on top), no capabilities, its own pid namespace, and always a
network namespace of its own with /run (daemons' Unix sockets) hidden: the host's
loopback — agentd's own API, databases, local daemons — is out of reach (issue 28). With
the sandbox network on, the way out is agentd's egress proxy (`agentd.tools.shell.egress`), a
Unix socket bound in and offered inside as `http://127.0.0.1:BRIDGE_PORT` by a small
bridge (`agentd.tools.shell.sandbox_bridge`) the sandbox's shell starts first. Resource
limits are rlimits set by a small bash prologue inside the sandbox (the hard limit too,
which a process without CAP_SYS_RESOURCE cannot raise again).

`RLIMIT_NPROC` does not bind uid 0 (the kernel exempts root), so when the server runs as
root the process limit comes from a pids cgroup instead (`agentd.tools.shell.pidlimit`); this
module only says where the command must be put.
"""

from __future__ import annotations

import ipaddress
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum
from pathlib import Path

from agentd.infra import AuthMode, SandboxSetting

MIB = 1024 * 1024
SHELL = "/bin/bash"
EGRESS_SOCKET = Path("/run/agentd/egress.sock")  # where the proxy's socket appears inside
BRIDGE_PORT = 39281  # the sandbox's own loopback port the bridge listens on


class SandboxMode(StrEnum):
    BWRAP = "bwrap"
    NONE = "none"


class SandboxError(Exception):
    """The configured sandbox cannot be had; the message names the setting to change."""


@dataclass(frozen=True)
class SandboxLimits:
    """Per command (0: no limit). Memory is the data segment (RLIMIT_DATA), not the address
    space: runtimes such as V8 and wasm reserve far more address space than they use."""

    cpu_s: int = 0
    memory_mb: int = 0
    file_mb: int = 0
    procs: int = 0


@dataclass(frozen=True)
class SandboxPolicy:
    """What a sandboxed command may see, besides its workspace (given per command)."""

    bwrap: str = "bwrap"
    hidden_dirs: tuple[Path, ...] = ()  # covered by an empty tmpfs (must exist)
    hidden_files: tuple[Path, ...] = ()  # replaced by /dev/null (must exist)
    network: bool = True  # egress through agentd's proxy (never the host's own network)
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    python: str = ""  # an interpreter for the bridge (the server's own, by real path)


DOCKER_SANDBOX_FLAGS = "--security-opt seccomp=unconfined --security-opt apparmor=unconfined"


@dataclass(frozen=True)
class BwrapProbe:
    """What start-up found: the bwrap binary (None: not installed) and, if it is
    installed but cannot build a sandbox here, why not."""

    path: str | None
    error: str | None = None

    @property
    def usable(self) -> bool:
        return self.path is not None and self.error is None

    def describe(self) -> str:
        if self.path is None:
            return "bwrap (bubblewrap) is not installed"
        # Docker's default seccomp and AppArmor profiles forbid the user namespaces bwrap makes.
        return (
            f"{self.path} cannot create a sandbox here ({self.error}); in a container, run it with "
            f"{DOCKER_SANDBOX_FLAGS}"
        )


@dataclass(frozen=True)
class SandboxDecision:
    mode: SandboxMode
    message: str  # one log line saying what shell commands run under, and why
    warn: bool = False  # the line is a warning (commands run unconfined without being asked to)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a hostname: it may resolve to anything


def resolve_sandbox(setting: SandboxSetting, probe: BwrapProbe, host: str, auth: AuthMode) -> SandboxDecision:
    """The sandbox mode at start-up. `auto` falls back to none with a warning, except on a
    server others can reach (token auth off loopback): there running commands unconfined
    must be asked for with AGENTD_SANDBOX=none, so a missing package cannot silently do it."""
    if setting is SandboxSetting.NONE:
        return SandboxDecision(
            SandboxMode.NONE, "sandbox: off (AGENTD_SANDBOX=none): bash commands run unconfined"
        )
    if probe.usable:
        return SandboxDecision(
            SandboxMode.BWRAP,
            f"sandbox: bash commands run under {probe.path} (workspace writable, the rest read-only)",
        )
    if setting is SandboxSetting.BWRAP:
        raise SandboxError(
            f"AGENTD_SANDBOX=bwrap, but {probe.describe()}; install bubblewrap "
            "(apt-get install bubblewrap) or choose AGENTD_SANDBOX=auto|none"
        )
    if auth is AuthMode.TOKEN and not is_loopback(host):
        raise SandboxError(
            f"refusing to serve on {host} with bash commands unconfined: {probe.describe()}. "
            "Install bubblewrap (apt-get install bubblewrap), or set AGENTD_SANDBOX=none to run "
            "the agent's commands without a sandbox on purpose"
        )
    return SandboxDecision(
        SandboxMode.NONE,
        f"sandbox: off: {probe.describe()}; bash commands run unconfined "
        "(install bubblewrap for a sandbox, or set AGENTD_SANDBOX=none to silence this)",
        warn=True,
    )


_BRIDGE = (
    # The bridge (`$2 -c "$3"`) says `ready` once listening; the command starts only then.
    f'exec 3< <(exec "$2" -I -S -c "$3" {EGRESS_SOCKET} {BRIDGE_PORT} </dev/null 2>/dev/null) '
    '&& IFS= read -r -t 10 ready <&3 && [ "$ready" = ready ] && exec 3<&- '
    '|| { echo "agentd sandbox: the network bridge did not start" >&2; exit 126; }; '
)


def limits_prologue(limits: SandboxLimits, bridge: bool = False) -> str:
    """Bash that starts the network bridge (when asked), sets the limits (soft and hard:
    bash's `ulimit` without -S/-H sets both) and then runs the command given as `$1` in a
    fresh bash."""
    flags = []
    if limits.cpu_s:
        flags.append(f"-t {limits.cpu_s}")
    if limits.memory_mb:
        flags.append(f"-d {limits.memory_mb * 1024}")  # KiB
    if limits.file_mb:
        flags.append(f"-f {limits.file_mb * 1024}")  # 1024-byte blocks (bash, not POSIX mode)
    if limits.procs:
        flags.append(f"-u {limits.procs}")
    setting = f"ulimit {' '.join(flags)} || exit 126; " if flags else ""
    return f'{_BRIDGE if bridge else ""}{setting}exec {SHELL} -c "$1"'


class _Order(IntEnum):
    # At the same depth a hidden directory goes first, so a workspace that *is* a hidden
    # root is bound back on top of it.
    BASE = 0
    HIDE = 1
    WORKSPACE = 2
    MASK = 3


def _inside(path: Path, dirs: Sequence[Path]) -> bool:
    return any(path.is_relative_to(d) for d in dirs)


def bwrap_argv(
    policy: SandboxPolicy, workspace: Path, command: str, egress: Path | None = None, bridge: str = ""
) -> list[str]:
    """The argv that runs `/bin/bash -c command` in the sandbox, cwd the workspace; with
    `egress` (the proxy's socket on the host) and `bridge` (its code), the command's way out.

    Mounts are applied in order of depth (parents before children), whatever their kind:
    a workspace inside a hidden directory is bound back on top of the tmpfs, and a hidden
    directory or file inside the workspace is hidden on top of the workspace."""
    ws = Path(workspace)
    mounts: list[tuple[int, _Order, list[str]]] = [
        (0, _Order.BASE, ["--ro-bind", "/", "/"]),
        (1, _Order.BASE, ["--dev", "/dev"]),
        (1, _Order.BASE, ["--proc", "/proc"]),
        (1, _Order.BASE, ["--tmpfs", "/tmp"]),
    ]
    # Daemons' Unix sockets (a database's, Docker's) live in /run: a way out that a network
    # namespace does not close, so they are hidden too.
    mounts.append((1, _Order.BASE, ["--tmpfs", "/run"]))
    with_bridge = egress is not None and bool(bridge) and bool(policy.python)
    if with_bridge:
        mounts.append((len(EGRESS_SOCKET.parts), _Order.MASK, ["--ro-bind", str(egress), str(EGRESS_SOCKET)]))
    hidden = [Path(d) for d in policy.hidden_dirs]

    def covered(p: Path) -> bool:
        # Under another hidden directory (or /tmp) `p` is gone already, unless it is inside
        # the workspace, which is bound back on top: then it needs hiding of its own.
        return _inside(p, [d for d in [*hidden, Path("/tmp")] if d != p]) and not p.is_relative_to(ws)

    for d in hidden:
        if not covered(d):
            mounts.append((len(d.parts), _Order.HIDE, ["--tmpfs", str(d)]))
    mounts.append((len(ws.parts), _Order.WORKSPACE, ["--bind", str(ws), str(ws)]))
    for f in map(Path, policy.hidden_files):
        if not covered(f):
            mounts.append((len(f.parts), _Order.MASK, ["--ro-bind", "/dev/null", str(f)]))
    mounts.sort(key=lambda m: (m[0], m[1]))
    argv = [policy.bwrap]
    for _, _, args in mounts:
        argv += args
    argv += [
        "--chdir", str(ws),
        "--unshare-pid",  # sees only its own processes; all of them die with it
        "--unshare-ipc",
        "--die-with-parent",
        "--new-session",  # no ioctl(TIOCSTI) into a terminal the server may have
        "--cap-drop", "ALL",  # as root bwrap would otherwise keep every capability
        "--unshare-net",  # its own loopback only: the host's (agentd's API) is out of reach
    ]  # fmt: skip
    argv += ["--", SHELL, "-c", limits_prologue(policy.limits, with_bridge), "agentd-sandbox", command]
    if with_bridge:
        argv += [policy.python, bridge]
    return argv


def in_cgroup(procs_file: Path, argv: Sequence[str]) -> list[str]:
    """`argv` started inside the cgroup whose `cgroup.procs` is `procs_file`: a shell moves
    itself in, then execs (so every descendant is counted from the first fork on)."""
    script = f'echo $$ > {shlex.quote(str(procs_file))} || exit 126; exec "$@"'
    return ["/bin/sh", "-c", script, "agentd-cgroup", *argv]

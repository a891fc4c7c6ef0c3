"""How shell commands are started: under the sandbox chosen at start-up, or unconfined.

`ShellLauncher.from_settings` probes bubblewrap once, decides the mode
(`agentd.tools.shell.sandbox.resolve_sandbox`), logs one line saying what commands run under,
and finds a pids cgroup for the process limit. `prepare` then gives the argv of one
command (and a cgroup to remove, and its egress proxy to close, when it has ended).
`bash`, background tasks, `!cmd` and stdio MCP servers share it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy.engine import make_url

from agentd.infra import SandboxNetwork, Settings
from agentd.tools.errors import ToolError
from agentd.tools.shell import pidlimit
from agentd.tools.shell.egress_policy import EgressPolicy, parse_allowed
from agentd.tools.shell.proctrack import TAG_VAR, tagged_env
from agentd.tools.shell.sandbox import (
    BRIDGE_PORT,
    MIB,
    SHELL,
    BwrapProbe,
    SandboxError,
    SandboxLimits,
    SandboxMode,
    SandboxPolicy,
    bwrap_argv,
    in_cgroup,
    resolve_sandbox,
)

if TYPE_CHECKING:
    from agentd.tools.shell.egress import EgressProxy

log = logging.getLogger(__name__)

DEFAULT_OUTPUT_LIMIT = 256 * MIB
_PROBE_TIMEOUT = 15.0
SANDBOX_ENV = {"XDG_CACHE_HOME": "/tmp/.cache", "npm_config_cache": "/tmp/.npm"}
_PROXY_URL = f"http://127.0.0.1:{BRIDGE_PORT}"
# With the sandbox network on, tools find the way out here; the sandbox's own loopback
# (servers a command starts for itself, e.g. in tests) is reached directly.
PROXY_ENV = {
    **{name: _PROXY_URL for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")},
    **{name: "localhost,127.0.0.1,::1" for name in ("NO_PROXY", "no_proxy")},
}
BRIDGE_CODE = (Path(__file__).parent / "sandbox_bridge.py").read_text()
_RELEASE_RETRIES = 5
_RELEASE_DELAY = 2.0  # seconds between tries to remove a command's pids cgroup


@dataclass
class Launch:
    """One command ready to spawn; `release()` once it and its processes have ended."""

    argv: list[str]
    env: dict[str, str]
    procs_file: Path | None = None
    egress: EgressProxy | None = None  # the command's way out (sandbox network on)

    def release(self) -> None:
        if self.egress is not None:
            self.egress.close()
            self.egress = None
        if self.procs_file is not None:
            _remove_cgroup(self.procs_file, _RELEASE_RETRIES)
            self.procs_file = None


def _remove_cgroup(procs_file: Path, retries: int) -> None:
    # After a cancel the kill is still under way: try again shortly (and a crash leaves it
    # to the sweep at the next start).
    if pidlimit.remove(procs_file) or not retries:
        return
    with contextlib.suppress(RuntimeError):  # no running loop: the sweep will do
        asyncio.get_running_loop().call_later(_RELEASE_DELAY, _remove_cgroup, procs_file, retries - 1)


@dataclass
class ShellLauncher:
    mode: SandboxMode = SandboxMode.NONE
    policy: SandboxPolicy = field(default_factory=SandboxPolicy)
    pids_parent: Path | None = None  # where per-command pids cgroups go (None: rlimit only)
    output_limit: int = DEFAULT_OUTPUT_LIMIT  # bytes of output before a command is stopped
    egress: EgressPolicy = field(default_factory=EgressPolicy)

    def prepare(self, command: str, cwd: Path, tag: str, readable: Sequence[Path] = ()) -> Launch:
        """Called on the event loop (the egress proxy of a sandboxed command is served there).
        `readable`: host paths under /tmp the command needs (`paths_under_tmp`)."""
        env = tagged_env(tag)  # inherited by every descendant, setsid or not
        if self.mode is SandboxMode.NONE:
            return Launch([SHELL, "-c", command], env)
        # The server's own settings (API keys, the database URL) are not the command's business.
        env = {k: v for k, v in env.items() if not k.startswith("AGENTD_") or k == TAG_VAR}
        # $HOME is read-only in there: caches (pip, go, npm) go to the sandbox's private /tmp.
        env.update(SANDBOX_ENV)
        # Only what exists now can be mounted over (a SQLite journal comes and goes).
        policy = replace(
            self.policy,
            hidden_dirs=tuple(p for p in self.policy.hidden_dirs if p.is_dir()),
            hidden_files=tuple(p for p in self.policy.hidden_files if p.is_file()),
        )
        egress: EgressProxy | None = None
        try:
            if policy.network:  # the proxy's module only then (idle RSS, issue 32 item 3)
                from agentd.tools.shell.egress import EgressProxy

                egress = EgressProxy.open(self.egress)
        except OSError as exc:  # refused rather than run with a network it was not given
            raise ToolError(f"cannot set up the sandbox's network: {exc}") from None
        if egress is not None:
            env.update(PROXY_ENV)
        try:
            argv = bwrap_argv(
                policy,
                Path(os.path.realpath(cwd)),
                command,
                egress.path if egress else None,
                BRIDGE_CODE,
                readable,
            )
            procs = self.policy.limits.procs
            if self.pids_parent is None or not procs:
                return Launch(argv, env, egress=egress)
            try:
                procs_file = pidlimit.create(self.pids_parent, tag, procs)
            except OSError as exc:
                # Refused rather than run without the limit the operator configured.
                raise ToolError(f"cannot set up the sandbox's process limit: {exc}") from None
        except BaseException:
            if egress is not None:
                egress.close()
            raise
        return Launch(in_cgroup(procs_file, argv), env, procs_file, egress)

    @classmethod
    def from_settings(cls, settings: Settings, *, bwrap: str | None = None) -> ShellLauncher:
        """Raises `SandboxError` when the configured sandbox cannot be had."""
        probe = probe_bwrap(bwrap or shutil.which("bwrap"))
        decision = resolve_sandbox(settings.sandbox, probe, settings.host, settings.auth)
        output_limit = settings.bash_output_mb * MIB
        if decision.mode is SandboxMode.NONE:
            (log.warning if decision.warn else log.info)("%s", decision.message)
            return cls(output_limit=output_limit)
        limits = SandboxLimits(
            cpu_s=settings.sandbox_cpu_s,
            memory_mb=settings.sandbox_memory_mb,
            file_mb=settings.sandbox_file_mb,
            procs=settings.sandbox_procs,
        )
        assert probe.path is not None
        policy = SandboxPolicy(
            bwrap=probe.path,
            hidden_dirs=tuple(hidden_dirs(settings)),
            hidden_files=tuple(database_files(settings)),
            network=settings.sandbox_network is SandboxNetwork.ON,
            limits=limits,
            python=os.path.realpath(sys.executable),
        )
        try:
            allowed = parse_allowed(settings.sandbox_egress_allow)
        except ValueError as exc:
            raise SandboxError(f"AGENTD_SANDBOX_EGRESS_ALLOW: {exc}") from None
        egress = EgressPolicy(allowed, frozenset({settings.port}))
        pids_parent = pidlimit.find_parent() if limits.procs else None
        if not limits.procs:
            procs_how = "no process limit"
        elif pids_parent is not None:
            procs_how = f"{limits.procs} processes (pids cgroup)"
        elif os.geteuid() == 0:
            procs_how = "no process limit: RLIMIT_NPROC does not bind root and no pids cgroup is usable"
        else:
            procs_how = f"{limits.procs} processes (RLIMIT_NPROC)"
        log.info(
            "%s; network %s; per process: cpu %s s, memory %s MiB, files %s MiB (0: no limit); %s",
            decision.message,
            "through agentd's egress proxy (public addresses only)" if policy.network else "off",
            limits.cpu_s,
            limits.memory_mb,
            limits.file_mb,
            procs_how,
        )
        return cls(SandboxMode.BWRAP, policy, pids_parent, output_limit, egress)


def paths_under_tmp(argv: Sequence[str]) -> list[Path]:
    """What of a command line lies under /tmp, which the sandbox replaces with its own: the
    command (found on PATH), its `#!` interpreter and the arguments naming existing files —
    each file, or the whole virtualenv for an interpreter inside one (its `pyvenv.cfg` and
    packages come with it). Only files: never a directory (nor a socket) named by an argument."""
    found: list[Path] = []

    def add(path: str) -> None:
        for p in dict.fromkeys((Path(path), Path(os.path.realpath(path)))):
            if not p.is_relative_to("/tmp") or not p.is_file():
                continue
            venv = p.parent.parent
            found.append(venv if p.parent.name == "bin" and (venv / "pyvenv.cfg").is_file() else p)

    for i, arg in enumerate(argv):
        path = (shutil.which(arg) or "") if i == 0 and "/" not in arg else arg
        if not os.path.isabs(path):
            continue
        add(path)
        if i == 0 and os.path.isfile(path):
            head = b""
            with contextlib.suppress(OSError), open(path, "rb") as f:
                head = f.read(256)
            if head.startswith(b"#!"):  # the interpreter of a script
                interpreter = head[2:].split(b"\n", 1)[0].split()
                if interpreter and interpreter[0].startswith(b"/"):
                    add(os.fsdecode(interpreter[0]))
    return list(dict.fromkeys(found))


def probe_bwrap(path: str | None) -> BwrapProbe:
    """Is bwrap installed, and can it build a sandbox here? (Not in every container: user
    namespaces or mounts may be forbidden.) Tried for real with a trivial command."""
    if path is None:
        return BwrapProbe(None)
    argv = [path, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid"]
    argv += ["--die-with-parent", "--cap-drop", "ALL", "--unshare-net"]
    try:
        done = subprocess.run(
            [*argv, "--", "/bin/true"], capture_output=True, timeout=_PROBE_TIMEOUT, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return BwrapProbe(path, str(exc))
    if done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip().splitlines()
        return BwrapProbe(path, why[-1] if why else f"exit status {done.returncode}")
    return BwrapProbe(path)


def hidden_dirs(settings: Settings) -> list[Path]:
    """The server's home (database, tokens, MCP logs, default workspaces) and the root of
    all sessions' workspaces: the session's own workspace is bound back on top."""
    dirs = [settings.home]
    if settings.workspace_root is not None:
        dirs.append(settings.workspace_root)
    return [Path(os.path.realpath(d)) for d in dirs]


def database_files(settings: Settings) -> list[Path]:
    """A SQLite database file outside the home, with its journal files."""
    url = make_url(settings.resolved_database_url())
    if not url.drivername.startswith("sqlite") or not url.database or url.database == ":memory:":
        return []
    db = Path(os.path.realpath(url.database))
    return [db, *(db.with_name(db.name + s) for s in ("-wal", "-shm", "-journal"))]

"""`agentd doctor` and the start-up notes (issue 31, item 6): which optional parts this
machine has, and what each one changes.

`gather` looks (programs on PATH and their versions, the database and Redis reached with a
deadline, the proxy variables); `report` and `startup_notes` are pure functions over what it
found, so the wording and the decisions are tested as a table without a server.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from enum import StrEnum

from agentd.infra import Settings, redact_url

PROBE_TIMEOUT_S = 3.0  # each program's --version, each connection


class Status(StrEnum):
    PRESENT = "present"
    MISSING = "missing"
    OFF = "off"  # not configured: nothing is degraded, the line says what it would add
    FAILED = "failed"  # configured but not reachable / not usable


@dataclass(frozen=True)
class Facts:
    """What `gather` found. A program: its version line, "" when present without one, None
    when missing."""

    rg: str | None = None
    bwrap: str | None = None
    bwrap_problem: str | None = None  # installed but cannot build a sandbox here
    git: str | None = None
    node: str | None = None
    database: str = ""  # the URL, password redacted
    database_problem: str | None = None
    redis: str | None = None  # AGENTD_REDIS_URL, redacted; None when unset
    redis_problem: str | None = None
    proxies: dict[str, str] = field(default_factory=dict)  # urllib's shape: https, http, all, no


@dataclass(frozen=True)
class Line:
    part: str
    status: Status
    detail: str  # version, address
    effect: str  # what it changes

    def render(self) -> str:
        detail = f" {self.detail}" if self.detail else ""
        return f"{self.status.value:<8} {self.part}{detail}: {self.effect}"


def report(facts: Facts) -> list[Line]:
    """One line per optional part."""
    lines = [
        _program(
            "ripgrep",
            facts.rg,
            "grep runs rg (fast; .gitignore honoured)",
            "grep walks the tree in Python, much slower on large trees: install ripgrep",
        )
    ]
    if facts.bwrap is not None and facts.bwrap_problem:
        lines.append(
            Line(
                "bubblewrap",
                Status.FAILED,
                facts.bwrap,
                f"cannot build a sandbox here ({facts.bwrap_problem}); in Docker run with "
                "--security-opt seccomp=unconfined --security-opt apparmor=unconfined",
            )
        )
    else:
        lines.append(
            _program(
                "bubblewrap",
                facts.bwrap,
                "bash and stdio MCP servers run sandboxed (AGENTD_SANDBOX=auto)",
                "bash runs unconfined on loopback; with tokens off loopback the server refuses "
                "to start: install bubblewrap",
            )
        )
    lines.append(
        _program(
            "git",
            facts.git,
            "a max-iterations stop in a dirty worktree makes a WIP commit",
            "no WIP commit when a budget stops a turn: install git",
        )
    )
    lines.append(
        _program(
            "node",
            facts.node,
            "stdio MCP servers written for Node (node, npx) can start",
            "MCP servers that need node or npx cannot start",
        )
    )
    if facts.database_problem:
        lines.append(Line("database", Status.FAILED, facts.database, facts.database_problem))
    else:
        effect = (
            "reachable: several replicas may share it"
            if facts.database.startswith("postgresql")
            else "SQLite: one server per file (a Postgres URL lets several replicas share one)"
        )
        lines.append(Line("database", Status.PRESENT, facts.database, effect))
    if facts.redis is None:
        lines.append(
            Line(
                "redis",
                Status.OFF,
                "",
                "AGENTD_REDIS_URL unset: replicas share live chunks through the database",
            )
        )
    elif facts.redis_problem:
        lines.append(Line("redis", Status.FAILED, facts.redis, facts.redis_problem))
    else:
        lines.append(Line("redis", Status.PRESENT, facts.redis, "reachable: live chunks reach every replica"))
    lines.append(_proxy_line(facts.proxies))
    return lines


def startup_notes(facts: Facts) -> list[str]:
    """The log lines start-up writes: one per missing part that degrades a feature (the
    sandbox's own line is the shell's, not repeated here)."""
    return [
        f"{line.part} not found: {line.effect}"
        for line in report(facts)
        if line.status is Status.MISSING and line.part != "bubblewrap"
    ]


def log_startup_notes() -> None:
    """Log `startup_notes` for this machine (PATH only: no process started)."""
    for note in startup_notes(present_only(which_programs())):
        logging.getLogger("agentd").info("%s", note)


def _program(name: str, version: str | None, present: str, missing: str) -> Line:
    if version is None:
        return Line(name, Status.MISSING, "", missing)
    return Line(name, Status.PRESENT, version, present)


def _proxy_line(proxies: dict[str, str]) -> Line:
    used = {k: redact_url(v) for k, v in proxies.items() if k in ("https", "http", "all")}
    if not used:
        return Line("proxy", Status.OFF, "", "no HTTPS_PROXY/HTTP_PROXY: model calls connect directly")
    shown = ", ".join(f"{k}={v}" for k, v in sorted(used.items()))
    bypass = f"; direct for NO_PROXY={proxies['no']}" if proxies.get("no") else ""
    return Line("proxy", Status.PRESENT, shown, f"model calls go through it{bypass}")


# -- looking


def which_programs() -> dict[str, str | None]:
    """The optional programs' paths (cheap: no process started)."""
    return {name: shutil.which(name) for name in ("rg", "bwrap", "git", "node")}


def present_only(paths: dict[str, str | None]) -> Facts:
    """Facts from PATH alone, for start-up (versions unknown: "")."""
    return Facts(
        rg="" if paths.get("rg") else None,
        bwrap="" if paths.get("bwrap") else None,
        git="" if paths.get("git") else None,
        node="" if paths.get("node") else None,
    )


def version(path: str | None, flag: str = "--version") -> str | None:
    if path is None:
        return None
    try:
        out = subprocess.run(
            [path, flag], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    found = re.search(r"\d+(?:\.\d+)+", out)  # "ripgrep 14.1.0", "git version 2.43.0", "v22.11.0"
    return found.group(0) if found else ""


async def gather(settings: Settings) -> Facts:
    from urllib.request import getproxies_environment  # `agentd doctor` only, not a server's start

    from agentd.tools import probe_bwrap

    paths = which_programs()
    bwrap = paths["bwrap"]
    probe = probe_bwrap(bwrap) if bwrap else None
    database = settings.resolved_database_url()
    redis_url = os.environ.get("AGENTD_REDIS_URL") or None
    return Facts(
        rg=version(paths["rg"]),
        bwrap=version(bwrap),
        bwrap_problem=probe.error if probe is not None else None,
        git=version(paths["git"]),
        node=version(paths["node"]),
        database=redact_url(database),
        database_problem=await _database_problem(database),
        redis=redact_url(redis_url) if redis_url else None,
        redis_problem=await _redis_problem(redis_url) if redis_url else None,
        proxies=getproxies_environment(),
    )


async def _database_problem(url: str) -> str | None:
    """Postgres: connected to (not migrated). SQLite: not opened (that would create the file)."""
    if not url.startswith("postgresql"):
        return None
    from agentd.preflight import StartupError, open_store

    try:
        async with asyncio.timeout(PROBE_TIMEOUT_S * 3), open_store(url, migrate=False):
            pass
    except StartupError as exc:
        return str(exc)
    except TimeoutError:
        return f"no answer within {PROBE_TIMEOUT_S * 3:.0f}s"
    return None


async def _redis_problem(url: str) -> str | None:
    """PING over a plain socket (no client library needed for a yes/no)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss"):
        return f"not a redis:// URL ({parts.scheme}://)"
    try:
        async with asyncio.timeout(PROBE_TIMEOUT_S):
            reader, writer = await asyncio.open_connection(
                parts.hostname or "127.0.0.1", parts.port or 6379, ssl=parts.scheme == "rediss"
            )
            try:
                if parts.password:
                    user = parts.username or "default"
                    writer.write(_command("AUTH", user, parts.password))
                    await reader.readline()
                writer.write(_command("PING"))
                answer = await reader.readline()
            finally:
                writer.close()
    except (OSError, TimeoutError) as exc:
        return f"not reachable ({type(exc).__name__}: {exc})"
    if not answer.startswith(b"+PONG"):
        return f"answered {answer[:60].decode(errors='replace').strip()!r} to PING"
    return None


def _command(*words: str) -> bytes:
    out = [b"*%d\r\n" % len(words)]
    for word in words:
        data = word.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)

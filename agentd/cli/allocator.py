"""`agentd serve` under the C library's allocator (issue 32 item 3: memory after a load).

CPython's own small-object allocator (pymalloc) gives a 1 MiB arena back to the OS only
when every block in it is free; after a load a few hundred long-lived survivors (uvloop's
and asyncio's free lists, per-connection leftovers) pin ~19 of the load's arenas, which no
release or collection can return (bench/RESULTS.md "Issue 32, hmem"). Under glibc's
malloc the same survivors pin 4 KiB pages, and the idle trim's `malloc_trim(0)` hands back
every free page between them: measured 60 s after a load, +6 MiB over the first turn's
figure instead of +21.

The allocator is chosen when the interpreter starts (`PYTHONMALLOC`), so `agentd serve`
runs itself again, first thing, with the variable set (`exec`: the same process id, the
same open files), unless `AGENTD_MALLOC=pymalloc` or the caller set `PYTHONMALLOC` itself.
The re-run process drops the variable again, so the tools' and MCP servers' processes
start with the environment the server was given.
"""

from __future__ import annotations

import os
import sys

ENV = "AGENTD_MALLOC"  # "malloc" (the default) or "pymalloc": the interpreter's own
_RERUN = "_AGENTD_MALLOC_RERUN"  # set for the re-run only: it drops PYTHONMALLOC again


def wanted(environ: os._Environ[str] | dict[str, str] = os.environ) -> bool:
    """Whether `agentd serve` should switch to malloc: asked (the default), nobody chose an
    allocator already, and on Linux (glibc's `malloc_trim` is what makes it pay)."""
    if environ.get(ENV, "malloc").strip().lower() != "malloc" or "PYTHONMALLOC" in environ:
        return False
    return sys.platform.startswith("linux")


def rerun_under_malloc(argv: list[str]) -> None:
    """Replace this process by the same command under `PYTHONMALLOC=malloc` when `wanted`;
    returns otherwise (or when the exec fails: the server then runs as it is). `argv`:
    `sys.argv` — only when it is the process's real command line (a test calling `main()`
    in its own interpreter has another one, and stays)."""
    if os.environ.pop(_RERUN, None) is not None:
        os.environ.pop("PYTHONMALLOC", None)  # ours: not for the server's children
        return
    orig = getattr(sys, "orig_argv", [])
    if not wanted() or not argv[1:] or orig[-len(argv[1:]) :] != argv[1:] or not sys.executable:
        return
    env = {**os.environ, "PYTHONMALLOC": "malloc", _RERUN: "1"}
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(sys.executable, orig, env)
    except OSError:
        return


def active() -> str:
    """The allocator this interpreter runs under: pymalloc counts its blocks, malloc none."""
    return "pymalloc" if sys.getallocatedblocks() else "malloc"

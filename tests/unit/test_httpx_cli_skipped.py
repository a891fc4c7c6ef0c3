"""`import agentd` keeps httpx's command-line client (rich, click, pygments) out of the
server's memory, and `httpx.main` still runs the real client. Checked in fresh interpreters."""

from __future__ import annotations

import json
import subprocess
import sys

CLI_PACKAGES = ("rich", "click", "pygments")


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def loaded(first: str) -> list[str]:
    tops = "{m.split('.')[0] for m in sys.modules}"
    wanted = set(CLI_PACKAGES)
    code = f"import sys, json\n{first}\nimport httpx\nprint(json.dumps(sorted({tops} & {wanted!r})))"
    out = run(code)
    assert out.returncode == 0, out.stderr
    return list(json.loads(out.stdout))


def test_httpx_alone_loads_its_cli_packages_here() -> None:
    """The other half: without agentd first, this environment's httpx does load them (so the
    check below can fail)."""
    assert loaded("pass") == sorted(CLI_PACKAGES)


def test_agentd_first_keeps_them_out() -> None:
    assert loaded("import agentd") == []


def test_httpx_main_still_runs_the_real_cli() -> None:
    out = run("import sys, agentd, httpx\nsys.argv = ['httpx', '--help']\nhttpx.main()")
    assert out.returncode == 0, out.stderr
    assert "Usage: httpx" in out.stdout

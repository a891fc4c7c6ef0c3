"""The `agentd` command line run as a real subprocess, in a clean environment."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.proc import agentd_command

_NETWORK_VARS = {"http_proxy", "https_proxy", "all_proxy", "no_proxy", "ftp_proxy", "ws_proxy", "wss_proxy"}


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("AGENTD_") and k.lower() not in _NETWORK_VARS and not k.startswith("OPENAI_")
    }
    # Plain, wide output: no colours and no wrapping of rich's error panels.
    env.update(HOME=str(home), TMPDIR=str(home), NO_COLOR="1", TERM="dumb", COLUMNS="200")
    env.update(extra)
    return env


@dataclass
class Run:
    code: int
    out: str
    err: str

    @property
    def text(self) -> str:
        return self.out + self.err


async def agentd(*args: str, env: dict[str, str], cwd: Path, bound: float = 60) -> Run:
    proc = await asyncio.create_subprocess_exec(
        *agentd_command(), *args, env=env, cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        out, err = await asyncio.wait_for(proc.communicate(), bound)
    except TimeoutError:
        proc.kill()
        out, err = await proc.communicate()
        pytest.fail(f"agentd {' '.join(args)} did not exit within {bound}s:\n{out.decode()}{err.decode()}")
    assert proc.returncode is not None
    return Run(proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"))

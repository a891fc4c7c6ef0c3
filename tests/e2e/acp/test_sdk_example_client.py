"""The ACP Python SDK's own example client (`examples/client.py` of `agent-client-protocol`,
copied unmodified into tests/support/sdk_examples/) runs against `agentd acp` (issue 29 item
4): it spawns the agent, prompts from its console, prints the answers — and though it
answers every permission request and extension with "Method not found", a turn that needs
permission ends at once as refused, and agentd sends it no private traffic."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import sys
from pathlib import Path

import pytest

from tests.support.acp_stdio import agentd_env
from tests.support.paths import SUPPORT_DIR

pytestmark = pytest.mark.timeout(120)

EXAMPLE = SUPPORT_DIR / "sdk_examples" / "client.py"
# examples/client.py of the agent-client-protocol 0.12.1 sdist: the copy is the SDK's, unmodified.
EXAMPLE_SHA256 = "886f5ed5ad8cbd74faa236fce22b7f8cdd7493359119c7d888fc0be5b624f581"


async def test_the_sdk_example_client_runs_unmodified(tmp_path: Path, workspace: Path) -> None:
    assert hashlib.sha256(EXAMPLE.read_bytes()).hexdigest() == EXAMPLE_SHA256
    steps = [
        {"text": "Hello from agentd."},
        {
            "tool_calls": [
                {"name": "write_file", "id": "c_w", "arguments": {"path": "x.txt", "content": "x\n"}}
            ]
        },
        {"text": "It was refused."},
    ]
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": steps}))
    # Its usage: `python examples/client.py AGENT_PROGRAM [ARGS...]`; the session's cwd is its own.
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(EXAMPLE), sys.executable, "-m", "agentd.cli", "acp",
        cwd=workspace, env=agentd_env(tmp_path / "home", script),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    # Two console lines, then end of input: the example prompts once per line and exits at EOF.
    out, err = await asyncio.wait_for(proc.communicate(b"say hello\nwrite x.txt\n"), 90)
    stdout, stderr = out.decode(), err.decode(errors="replace")
    assert proc.returncode == 0, stderr
    said = "".join(re.findall(r"\| Agent: (.*)", stdout))  # one line per streamed chunk
    assert said.startswith("Hello from agentd."), stdout
    # The permission it refused with an error ended the write as refused, not a one-hour wait.
    assert not (workspace / "x.txt").exists()
    assert "Prompt failed" not in stderr  # each prompt got its answer
    # Nothing agentd-private reached it: its ext handlers would have answered "Method not found".
    assert "_agentd" not in stderr and "_agentd" not in stdout

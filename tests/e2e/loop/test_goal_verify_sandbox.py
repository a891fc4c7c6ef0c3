"""A goal's verification command is set by a client (`_agentd/goal/set` `verify`): it
runs in the same sandbox as `bash` (issue 28), so neither a client nor the model can use
it to run a command outside — a write outside the workspace fails, the server's home is
hidden, the host's loopback is out of reach — while it still sees the workspace."""

from __future__ import annotations

import json
import shutil
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentd.infra.config import PermissionMode, SandboxSetting
from tests.support.client import WsClient, text_prompt
from tests.support.server import scripted
from tests.support.session import events, served_session

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


@pytest.fixture
def listener() -> Iterator[int]:
    sock = socket.create_server(("127.0.0.1", 0))
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


def verification(client: WsClient, sid: str) -> dict[str, Any]:
    [goal] = [e for e in events(client, sid, "goal") if e.get("verdictEvent", {}).get("verification")]
    return dict(goal["verdictEvent"]["verification"])


async def test_the_verify_command_runs_in_the_sandbox(
    server_factory, workspace: Path, tmp_path: Path, listener: int
) -> None:
    outside, home = tmp_path / "outside", tmp_path / "home"
    outside.mkdir()
    (workspace / "done.txt").write_text("ok\n")
    reach = f"import socket; socket.create_connection(('127.0.0.1', {listener}), 3); print('reached')"
    verify = (
        f'echo pwned > {outside}/marker; ls {home}/agentd.db; {sys.executable} -c "{reach}"; '
        "cat done.txt"  # the workspace is there: the last command decides, and passes
    )
    verdict = {"decision": "candidate_complete", "evidence": "done.txt", "next_step": "none"}
    provider = scripted({"text": "done."}, {"text": json.dumps(verdict)})
    async with served_session(
        server_factory,
        workspace,
        provider,
        permission_mode=PermissionMode.BYPASS,
        sandbox=SandboxSetting.BWRAP,
    ) as (_, client, sid):
        await client.call("_agentd/goal/set", {"sessionId": sid, "objective": "done.txt", "verify": verify})
        result = await client.call("session/prompt", text_prompt(sid, "go"))
        assert result["stopReason"] == "end_turn"
        ran = verification(client, sid)
    assert ran["passed"] is True, ran
    output = ran["output"]
    assert output.endswith("ok\n") or output.endswith("ok"), output
    assert not (outside / "marker").exists()
    assert "Read-only file system" in output or "No such file" in output
    assert "reached" not in output and "Connection refused" in output
    assert f"{home}/agentd.db" not in output.replace(f"ls: cannot access '{home}/agentd.db'", "")

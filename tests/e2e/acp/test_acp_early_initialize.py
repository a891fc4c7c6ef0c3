"""`agentd acp` answers `initialize` while the server loads (issue 32 item 2): the answer
comes from agentd/transport/early.py before the app is imported, is byte for byte the one
the full path gives, and the real connection takes over the rest of stdin and the client's
capabilities. A server that then fails to load answers the waiting requests with the reason
and exits 1 with one line."""

from __future__ import annotations

from pathlib import Path

from agentd.protocol import AGENTD_CLIENT
from tests.support.acp_stdio import LineAgent, agentd_env, write_script
from tests.support.proc import free_port


def initialize(req_id: int, **meta: object) -> dict[str, object]:
    params = {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": False}}}
    return {"jsonrpc": "2.0", "id": req_id, "method": "initialize", "params": {**params, **meta}}


async def test_the_early_answer_is_the_full_paths_and_the_connection_takes_over(
    tmp_path: Path, workspace: Path
) -> None:
    agent = await LineAgent.spawn(agentd_env(tmp_path / "home", write_script(tmp_path)))
    # Everything at once, as an editor that does not wait: initialize (answered early), a
    # second one (only the real connection answers it), then a session and a prompt.
    await agent.send(
        initialize(1, _meta=AGENTD_CLIENT),
        initialize(1, _meta=AGENTD_CLIENT),
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "session/new",
            "params": {"cwd": str(workspace), "mcpServers": []},
        },
    )
    early, full = await agent.line(), await agent.line()
    assert early == full
    new, _ = await agent.answer(2)
    sid = new["result"]["sessionId"]
    prompt = [{"type": "text", "text": "write out.txt"}]
    await agent.send(
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "session/prompt",
            "params": {"sessionId": sid, "prompt": prompt},
        }
    )
    done, before = await agent.answer(3)
    assert done["result"]["stopReason"] == "end_turn", done
    assert (workspace / "out.txt").read_text() == "stdio\n"
    # The client's `_meta` opt-in from the early initialize reached the connection: it gets
    # agentd's own notifications (a stock client gets none).
    assert any(m.get("method", "").startswith("_agentd/") for m in before), [m.get("method") for m in before]
    code, err = await agent.close()
    assert code == 0, err


async def test_a_server_that_fails_to_load_answers_the_waiting_requests_and_exits_with_one_line(
    tmp_path: Path,
) -> None:
    env = agentd_env(tmp_path / "home", write_script(tmp_path))
    env["AGENTD_DATABASE_URL"] = f"postgresql+asyncpg://127.0.0.1:{free_port()}/nothing"  # nothing listens
    agent = await LineAgent.spawn(env)
    listing = {"jsonrpc": "2.0", "id": 2, "method": "session/list", "params": {}}
    await agent.send(initialize(1), listing)  # both wait in the pipe while it loads
    answered, _ = await agent.answer(1)
    assert answered["result"]["protocolVersion"] == 1
    refused, _ = await agent.answer(2)
    assert refused["error"]["code"] == -32603
    assert refused["error"]["message"].startswith("agentd could not start: ")
    assert refused["error"]["data"] == {"reason": "startup_failed"}
    code, err = await agent.close()
    assert code == 1
    assert err.strip().splitlines()[-1].startswith("agentd: error: could not start: "), err
    assert "Traceback" not in err

"""A detached, idle session is unloaded after the short `detached_evict_s` (issue 32 item 3:
the memory of sessions whose clients left comes back within a minute of a load, not after
`idle_evict_s`), and the next request reloads it from the store with everything it had:
the transcript, its mode, its model, its goal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentd.core.lane import Lane
from tests.support.client import text_prompt
from tests.support.polling import until
from tests.support.server import scripted
from tests.support.session import new_session


async def test_a_detached_session_is_unloaded_after_the_short_grace_and_reloads_whole(
    server_factory: Any, workspace: Path
) -> None:
    provider = scripted({"text": "before"}, {"text": "after"})
    fallback = Lane(provider, "backup-model", "backup")
    # idle_evict_s stays at its 600 s default: only the short grace can unload it here.
    async with server_factory(
        provider, model="main-model", fallbacks=[fallback], detached_evict_s=0.2
    ) as server:
        manager = server.app.state.agentd.manager
        client = await server.client()
        try:
            sid = await new_session(client, workspace)
            await client.call("session/prompt", text_prompt(sid, "one"))
            await client.call("session/set_mode", {"sessionId": sid, "modeId": "accept_edits"})
            await client.call(
                "session/set_config_option", {"sessionId": sid, "configId": "model", "value": "backup-model"}
            )
            await client.call("_agentd/goal/set", {"sessionId": sid, "objective": "keep a.txt tidy"})
            unloaded = manager.unloaded
            # Attached: never unloaded, however long its grace has passed.
            assert await manager.evict_idle(600.0, 0.0, now=1e12) == []

            await client.call("_agentd/session/detach", {"sessionId": sid})
            await until(lambda: manager.live_actor(sid) is None, what="the detached session's eviction")
            assert manager.unloaded == unloaded + 1

            # Reloaded from the store by the next requests: all of it is there.
            resumed = await client.call(
                "session/resume", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
            )
            assert resumed["modes"]["currentModeId"] == "accept_edits"
            goal = await client.call("_agentd/goal/get", {"sessionId": sid})
            assert goal["goal"]["objective"] == "keep a.txt tidy"
            snapshot = await client.call("_agentd/session/attach", {"sessionId": sid, "afterSeq": 0})
            assert snapshot["snapshot"]["model"] == "backup-model"
            await client.call("_agentd/goal/clear", {"sessionId": sid})
            result = await client.call("session/prompt", text_prompt(sid, "two"))
            assert result["stopReason"] == "end_turn"
            sent = provider.requests[-1]
            assert [m.content for m in sent.messages if m.role == "user"] == ["one", "two"]
            assert sent.model == "backup-model"
        finally:
            await client.close()

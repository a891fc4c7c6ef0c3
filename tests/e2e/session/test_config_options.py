"""What editors render (issue 12, item 4): a model selector among the session's config
options (category `model`, from the server's model, the provider chain and the agent
definitions), switchable per session; `config_option_update` to every client when mode,
model or agent change — from any client or a local command; `session_info_update` when the
title is set. Every frame validates against the pinned ACP schema."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentd.loop.context import Lane
from agentd.session.config_options import model_choices
from tests.support.client import WsClient, text_prompt
from tests.support.frames import attach
from tests.support.polling import until
from tests.support.server import scripted
from tests.support.session import assert_valid_frames

SET = "session/set_config_option"


def updates_of(client: WsClient, session_id: str, kind: str) -> list[dict[str, Any]]:
    return [u for u in client.updates(session_id) if u["sessionUpdate"] == kind]


def option(options: list[dict[str, Any]], option_id: str) -> dict[str, Any]:
    return next(o for o in options if o["id"] == option_id)


def test_model_choices_keep_order_and_drop_repeats() -> None:
    assert model_choices("a", ["b", "a"], [None, "c", "b"], "d") == ["a", "b", "c", "d"]
    assert model_choices("a", [], [], "a") == ["a"]


async def test_model_is_a_config_option_and_changes_reach_every_client(
    server_factory: Any, workspace: Path
) -> None:
    provider = scripted({"text": "ok"}, loop=True)
    fallback = Lane(provider, "backup-model", "backup")
    async with server_factory(provider, model="main-model", fallbacks=[fallback]) as server:
        editor, watcher = await server.client(), await server.client()
        try:
            new = await editor.call("session/new", {"cwd": str(workspace), "mcpServers": []})
            sid = new["sessionId"]
            model = option(new["configOptions"], "model")
            assert model["category"] == "model" and model["type"] == "select"
            assert model["currentValue"] == "main-model"
            assert [o["value"] for o in model["options"]][:2] == ["main-model", "backup-model"]
            await attach(watcher, sid)

            # The editor switches the model: the answer and every client show it.
            answer = await editor.call(SET, {"sessionId": sid, "configId": "model", "value": "backup-model"})
            assert option(answer["configOptions"], "model")["currentValue"] == "backup-model"
            await until(lambda: bool(updates_of(watcher, sid, "config_option_update")))
            seen = updates_of(watcher, sid, "config_option_update")[-1]["configOptions"]
            assert option(seen, "model")["currentValue"] == "backup-model"

            # An unknown model is refused and changes nothing.
            bad = await editor.request(SET, {"sessionId": sid, "configId": "model", "value": "nope"})
            assert bad["error"]["code"] == -32602 and "backup-model" in bad["error"]["message"]
            snapshot = await watcher.call("_agentd/session/attach", {"sessionId": sid, "afterSeq": 0})
            assert snapshot["snapshot"]["model"] == "backup-model"

            # The watcher changes the mode: the editor's pickers follow.
            await watcher.call("session/set_mode", {"sessionId": sid, "modeId": "plan"})
            await until(
                lambda: any(
                    option(u["configOptions"], "mode")["currentValue"] == "plan"
                    for u in updates_of(editor, sid, "config_option_update")
                )
            )
            # A local command changes the model too.
            await editor.call("session/prompt", text_prompt(sid, "/model main-model"))

            def latest_model() -> str:
                latest = updates_of(watcher, sid, "config_option_update")[-1]["configOptions"]
                return str(option(latest, "model")["currentValue"])

            await until(lambda: latest_model() == "main-model")
            assert_valid_frames(editor)
            assert_valid_frames(watcher)
        finally:
            await editor.close()
            await watcher.close()


async def test_the_title_is_sent_as_session_info(server_factory: Any, workspace: Path) -> None:
    async with server_factory(scripted({"text": "hello"})) as server:
        editor, watcher = await server.client(), await server.client()
        try:
            sid = (await editor.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
            await attach(watcher, sid)
            await editor.call("session/prompt", text_prompt(sid, "Fix the\x00 login bug"))
            for client in (editor, watcher):
                await until(lambda c=client: bool(updates_of(c, sid, "session_info_update")))
                info = updates_of(client, sid, "session_info_update")[0]
                assert info["title"] == "Fix the login bug"
                assert info["updatedAt"]
            listed = await editor.call("session/list", {})
            assert listed["sessions"][0]["title"] == "Fix the login bug"
            assert_valid_frames(editor)
        finally:
            await editor.close()
            await watcher.close()


async def test_additional_directories_are_refused_clearly(server_factory: Any, workspace: Path) -> None:
    async with server_factory(scripted({"text": "x"})) as server:
        client = await server.client()
        try:
            extra = str(workspace.parent)
            params = {"cwd": str(workspace), "mcpServers": [], "additionalDirectories": [extra]}
            refused = await client.request("session/new", params)
            assert refused["error"]["code"] == -32602
            assert "additionalDirectories is not supported" in refused["error"]["message"]
            assert (await client.call("session/list", {}))["sessions"] == []  # nothing was made
            ok = await client.call("session/new", {**params, "additionalDirectories": []})
            assert ok["sessionId"]
        finally:
            await client.close()

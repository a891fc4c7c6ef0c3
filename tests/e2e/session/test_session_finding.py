"""Sessions you can find (issue 17): `session/list` says each session's status, queue length
and who else is attached, and searches titles and cwds (`_meta.agentd.query`);
`_agentd/session/rename` is stored, broadcast, refused to a watcher, and checks its input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentd.infra.auth import create_token
from agentd.infra.config import AuthMode, PermissionMode
from agentd.protocol.agentd import RENAME, SHARE
from tests.support.client import RpcFailed, WsClient, text_prompt, ws_client
from tests.support.gated import GatedProvider
from tests.support.permissions import answer, asked
from tests.support.polling import until
from tests.support.server import scripted
from tests.support.session import is_event, is_update, new_session, tool_call

INVALID_PARAMS, NOT_FOUND, DENIED = -32602, -32002, -32014


async def as_principal(base_url: str, token: str) -> WsClient:
    return await ws_client(base_url, additional_headers={"Authorization": f"Bearer {token}"})


async def entry(client: WsClient, sid: str, **params: Any) -> dict[str, Any]:
    listed = (await client.call("session/list", params))["sessions"]
    [found] = [s for s in listed if s["sessionId"] == sid]
    return found


def live(e: dict[str, Any]) -> tuple[str, int, list[dict[str, Any]]]:
    a = e["_meta"]["agentd"]
    return a["status"], a["queued"], a["attached"]


async def test_list_shows_running_queued_waiting_and_who_else_is_attached(
    server_factory, workspace: Path
) -> None:
    gated = GatedProvider(
        scripted(
            {"text": "slow answer"},
            {"tool_calls": [tool_call("bash", "c1", command="echo hi")]},
            {"text": "after the tool"},
            loop=True,
        ),
        hold={0},
    )
    async with server_factory(gated, permission_mode=PermissionMode.DEFAULT) as server:
        me, other = await server.client(), await server.client()
        sid = await new_session(me, workspace)
        assert live(await entry(me, sid)) == ("idle", 0, [])
        await other.call("_agentd/session/attach", {"sessionId": sid, "afterSeq": 0})
        # The caller's own connection is not "someone else"; the other one is.
        assert live(await entry(me, sid))[2] == [{"principal": "local", "clients": 1}]
        assert live(await entry(other, sid))[2] == [{"principal": "local", "clients": 1}]

        for text in ("one", "two", "three"):
            await me.call("_agentd/prompt/enqueue", text_prompt(sid, text))
        await gated.held(0)
        assert live(await entry(me, sid))[:2] == ("running", 2)

        gated.release(0)
        await asked(me)  # the second turn's bash call waits for an answer
        assert live(await entry(me, sid))[:2] == ("waiting_permission", 1)
        await answer(me, await asked(me), "allow_once")
        # Idle as soon as a client has seen the last turn end.
        ended = [0]

        def third_ended(m: dict[str, Any]) -> bool:
            ended[0] += is_event(sid, "turn_ended")(m)
            return ended[0] == 3

        await me.wait_notification(third_ended)
        assert live(await entry(me, sid))[:2] == ("idle", 0)
        await other.close()
        await until(lambda: _alone(me, sid), what="the other client's detach")
        await me.close()


async def _alone(client: WsClient, sid: str) -> bool:
    return live(await entry(client, sid))[2] == []


async def test_search_matches_title_or_cwd_in_any_case(server_factory, workspace: Path, db_url: str) -> None:
    for name in ("alpha_dir", "alphaxdir"):
        (workspace / name).mkdir()
    async with server_factory(scripted({"text": "ok"}, loop=True), database_url=db_url) as server:
        client = await server.client()
        ids = [await new_session(client, workspace) for _ in range(3)]
        in_alpha = await new_session(client, workspace / "alpha_dir")
        in_alphax = await new_session(client, workspace / "alphaxdir")
        await client.call(RENAME, {"sessionId": ids[0], "title": "Release NOTES 100%"})
        await client.call(RENAME, {"sessionId": ids[1], "title": "notes on the parser"})

        async def found(query: str) -> set[str]:
            res = await client.call("session/list", {"_meta": {"agentd": {"query": query}}})
            return {s["sessionId"] for s in res["sessions"]}

        assert await found("notes") == {ids[0], ids[1]}
        assert await found("NOTES 100%") == {ids[0]}
        assert await found("100%") == {ids[0]}  # `%` is a character, not a wildcard
        assert await found("ha_d") == {in_alpha}  # so is `_` (not alphaxdir)
        assert await found("ALPHA") == {in_alpha, in_alphax}
        assert await found("nothing like it") == set()
        assert len(await found("   ")) == 5  # blank: everything
        for bad in (7, "x" * 201, "a\x00b", "two\nlines"):
            with pytest.raises(RpcFailed) as err:
                await client.call("session/list", {"_meta": {"agentd": {"query": bad}}})
            assert err.value.error["code"] == INVALID_PARAMS
            assert "_meta.agentd.query" in err.value.error["message"]
        await client.close()


async def test_search_pages_with_the_cursor(server_factory, workspace: Path, db_url: str) -> None:
    async with server_factory(scripted(), database_url=db_url) as server:
        client = await server.client()
        store = server.app.state.agentd.store
        matching = set()
        for i in range(110):  # every other one in a folder the search names: 55 match
            folder = workspace / ("Match_dir" if i % 2 else "other")
            await store.create_session(
                id=f"sess_{i:03d}", owner="local", cwd=str(folder), mode="default", model="m"
            )
            if i % 2:
                matching.add(f"sess_{i:03d}")
        meta = {"agentd": {"query": "match_DIR"}}
        first = await client.call("session/list", {"_meta": meta})
        assert len(first["sessions"]) == 50 and "nextCursor" in first
        rest = await client.call("session/list", {"_meta": meta, "cursor": first["nextCursor"]})
        assert "nextCursor" not in rest
        found = [s["sessionId"] for s in first["sessions"] + rest["sessions"]]
        assert len(found) == 55 and set(found) == matching  # each once, only the matching
        assert found == sorted(found, reverse=True)  # newest first (created in id order)
        await client.close()


async def test_rename_is_stored_broadcast_and_checks_its_input(server_factory, workspace: Path) -> None:
    async with server_factory(scripted()) as server:
        me, watcher = await server.client(), await server.client()
        sid = await new_session(me, workspace)
        await watcher.call("_agentd/session/attach", {"sessionId": sid, "afterSeq": 0})
        assert await me.call(RENAME, {"sessionId": sid, "title": "  the parser  "}) == {
            "sessionId": sid,
            "title": "the parser",
        }
        # The other attached client is told (before the answer, so it is already there).
        assert any(
            u.get("sessionUpdate") == "session_info_update" and u.get("title") == "the parser"
            for u in watcher.updates(sid)
        )
        bad: list[tuple[dict[str, Any], int, str]] = [
            ({"sessionId": sid, "title": "   "}, INVALID_PARAMS, "not empty"),
            ({"sessionId": sid, "title": "x" * 201}, INVALID_PARAMS, "at most 200"),
            ({"sessionId": sid, "title": "two\nlines"}, INVALID_PARAMS, "printable"),
            ({"sessionId": sid, "title": "nul\x00"}, INVALID_PARAMS, "printable"),
            ({"sessionId": sid}, INVALID_PARAMS, "title"),
            ({"sessionId": sid, "title": 5}, INVALID_PARAMS, "title"),
            ({"sessionId": "sess_nope", "title": "x"}, NOT_FOUND, "sess_nope"),
        ]
        for params, code, words in bad:
            with pytest.raises(RpcFailed) as err:
                await me.call(RENAME, params)
            assert err.value.error["code"] == code, params
            assert words in err.value.error["message"], err.value.error
        assert (await entry(me, sid))["title"] == "the parser"  # a failed rename changed nothing
        await me.close()
        await watcher.close()

    async with server_factory(scripted()) as server:  # the same home: a restart
        client = await server.client()
        assert (await entry(client, sid))["title"] == "the parser"
        await client.call("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
        loaded = client.updates(sid)
        assert any(u.get("title") == "the parser" for u in loaded)  # replayed too
        await client.close()


async def test_a_watcher_may_not_rename_a_driver_may(server_factory, workspace: Path, db_url: str) -> None:
    async with server_factory(
        scripted(), database_url=db_url, auth=AuthMode.TOKEN, rate_limit_per_s=0,
        workspace_grants={"alice": [str(workspace)]},
    ) as server:  # fmt: skip
        store = server.app.state.agentd.store
        alice = await as_principal(
            server.base_url, (await create_token(store, "alice", teams=["core", "crew"]))[0]
        )
        wendy = await as_principal(server.base_url, (await create_token(store, "wendy", teams=["core"]))[0])
        dave = await as_principal(server.base_url, (await create_token(store, "dave", teams=["crew"]))[0])
        sid = await new_session(alice, workspace)
        await alice.call(SHARE, {"sessionId": sid, "team": "core", "access": "watch"})
        await alice.call(SHARE, {"sessionId": sid, "team": "crew", "access": "drive"})
        await alice.call(RENAME, {"sessionId": sid, "title": "alice's"})
        with pytest.raises(RpcFailed) as err:
            await wendy.call(RENAME, {"sessionId": sid, "title": "wendy's"})
        assert err.value.error["code"] == DENIED
        assert err.value.error["data"] == {"access": "watch", "needs": "drive"}
        assert (await entry(wendy, sid))["title"] == "alice's"
        # The watcher sees who else is attached (by principal, nothing more).
        await dave.call("_agentd/session/attach", {"sessionId": sid, "afterSeq": 0})
        assert (await entry(wendy, sid))["_meta"]["agentd"]["attached"] == [
            {"principal": "alice", "clients": 1},
            {"principal": "dave", "clients": 1},
        ]
        await dave.call(RENAME, {"sessionId": sid, "title": "dave's"})
        await alice.wait_notification(is_update(sid, "session_info_update", title="dave's"))
        assert (await entry(alice, sid))["title"] == "dave's"
        for c in (alice, wendy, dave):
            await c.close()

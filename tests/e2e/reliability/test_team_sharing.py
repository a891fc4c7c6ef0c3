"""Teams (R-X2), the matrix: alice owns a session and shares it with team `core` to watch
and team `crew` to drive. Five principals — the owner, a watcher, a driver, a member of
another team, one in no team — call every method of the method table on it, over the
WebSocket and `POST /rpc`, plus the SSE route, `session/list` and `/metrics`.

What each method needs is the table `NEEDS` below (the test fails when a method of the
table is missing from it, so a new method must be classified). Expected: no access → the
very answer a missing session gets; too little access → `-32014` with `{access, needs}`
and nothing changed; enough → past the check (any answer but those two).

Built on the cross-principal matrix's helpers (test_principals.py)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentd.infra.auth import create_token
from agentd.infra.config import AuthMode, PermissionMode
from agentd.protocol.agentd import ATTACH, DETACH, SHARE
from agentd.protocol.methods import QueueOp, Served
from agentd.transport.handlers import METHODS
from tests.support.client import WsClient, text_prompt
from tests.support.permissions import answer, asked, asks, round_trip, write
from tests.support.polling import until
from tests.support.principals import (
    NOT_FOUND,
    bounded,
    listed,
    normalized,
    params_for,
    targets_a_session,
    ws_as,
)
from tests.support.server import scripted
from tests.support.session import events, new_session
from tests.support.sse import sse

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(300)]

DENIED = -32014
RANK = {"none": 0, "watch": 1, "drive": 2, "owner": 3}
ROLES = {  # principal -> (teams of its token, its access to alice's session)
    "alice": (["core", "crew"], "owner"),
    "wendy": (["core"], "watch"),
    "dave": (["crew", "core"], "drive"),  # in both: the higher access counts
    "olga": (["elsewhere"], "none"),
    "nick": ([], "none"),
}
# What each session method needs. Reads are "watch"; what changes the session or steers its
# turns is "drive"; deleting, forking and sharing are the owner's.
NEEDS: dict[str, str] = {
    Served.SESSION_LOAD: "watch",
    Served.SESSION_RESUME: "watch",
    Served.ATTACH: "watch",
    Served.DETACH: "watch",
    Served.GOAL_GET: "watch",
    Served.USAGE_GET: "watch",
    Served.CHANGES: "watch",
    QueueOp.LIST.method: "watch",
    Served.SESSION_PROMPT: "drive",
    Served.SESSION_CANCEL: "drive",
    Served.SESSION_SET_MODE: "drive",
    Served.SESSION_SET_CONFIG_OPTION: "drive",
    Served.SESSION_CLOSE: "drive",
    Served.ENQUEUE: "drive",
    Served.SEND_NOW: "drive",
    Served.INTERJECT: "drive",
    Served.GOAL_SET: "drive",
    Served.GOAL_CLEAR: "drive",
    Served.RENAME: "drive",
    Served.COMPACT: "drive",
    Served.REWIND: "drive",
    Served.REVERT_FILE: "drive",
    Served.HOOKS_REGISTER: "drive",
    Served.PERMISSION_RESPOND: "drive",
    **{op.method: "drive" for op in QueueOp if op is not QueueOp.LIST},
    Served.SESSION_DELETE: "owner",
    Served.FORK: "owner",
    Served.EXPORT: "owner",  # its file snapshots and workspace are the owner's
    Served.SHARE: "owner",
}


def team_params(method: str, session_id: str, workspace: Path) -> dict[str, Any]:
    params = params_for(method, session_id, workspace)
    if method == SHARE:
        params.update(team="core", access="watch")  # a team of the owner's; same share again
    return params


def test_every_session_method_is_classified() -> None:
    session_methods = {m for m in METHODS if targets_a_session(m)}
    assert session_methods == set(NEEDS), session_methods ^ set(NEEDS)


async def shared_session(owner: WsClient, workspace: Path) -> str:
    sid = await bounded(new_session(owner, workspace))
    await owner.call(SHARE, {"sessionId": sid, "team": "core", "access": "watch"})
    await owner.call(SHARE, {"sessionId": sid, "team": "crew", "access": "drive"})
    return sid


def verdict(resp: dict[str, Any]) -> str:
    code = resp.get("error", {}).get("code")
    return "not_found" if code == NOT_FOUND else "denied" if code == DENIED else "passed"


async def test_every_method_honours_team_access(server_factory, workspace: Path, db_url: str) -> None:
    async with server_factory(
        scripted({"text": "ok"}, loop=True),
        database_url=db_url,
        auth=AuthMode.TOKEN,
        rate_limit_per_s=0,
        workspace_grants={"alice": [str(workspace)]},  # only the owner may work there
    ) as server:
        state = server.app.state.agentd
        tokens = {p: (await create_token(state.store, p, teams=teams))[0] for p, (teams, _) in ROLES.items()}
        clients = {p: await ws_as(server.base_url, t) for p, t in tokens.items()}
        http = httpx.AsyncClient(base_url=server.base_url, timeout=30)
        problems: list[str] = []
        try:
            for method in NEEDS:
                sid = await shared_session(clients["alice"], workspace)
                await state.writer.barrier()
                before = await state.store.last_seq(sid)
                # Least access first (a refusal must change nothing, so the log stays as it
                # was until the first call that may act); the owner last: its delete would
                # leave nothing for the others.
                for principal in ("nick", "olga", "wendy", "dave", "alice"):
                    access = ROLES[principal][1]
                    problems += await probe(
                        method, principal, access, clients[principal], tokens[principal], http, sid, workspace
                    )
                    if RANK[access] < RANK[NEEDS[method]]:
                        await state.writer.barrier()
                        if await state.store.last_seq(sid) != before:
                            problems.append(f"{method}: refused for {principal} yet the session changed")
            assert not problems, "\n".join(problems)
        finally:
            await http.aclose()
            for client in clients.values():
                await client.close()


async def probe(
    method: str,
    principal: str,
    access: str,
    client: WsClient,
    token: str,
    http: httpx.AsyncClient,
    sid: str,
    workspace: Path,
) -> list[str]:
    needs = NEEDS[method]
    missing = f"sess_{uuid.uuid4().hex}"
    answers = [("ws", await bounded(client.request(method, team_params(method, sid, workspace))))]
    on_missing = {"ws": await bounded(client.request(method, team_params(method, missing, workspace)))}
    # The owner's delete succeeds once: there is nothing left for a second transport.
    gone_after_ws = method == Served.SESSION_DELETE and access == "owner"
    if not METHODS[method].needs_connection and not gone_after_ws:
        headers = {"Authorization": f"Bearer {token}"}
        for target, key in ((missing, "missing"), (sid, "http")):
            body = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": method,
                "params": team_params(method, target, workspace),
            }
            got = (await http.post("/rpc", json=body, headers=headers)).json()
            if key == "missing":
                on_missing["http"] = got
            else:
                answers.append(("http", got))
    problems = []
    for transport, resp in answers:
        what = f"{method} by {principal} ({access}, needs {needs}) over {transport}"
        if access == "none":
            if method == DETACH:  # answers a stranger like a missing session: a no-op result
                ok = resp.get("result") == {"detached": False}
            else:
                ok = verdict(resp) == "not_found"
            if not ok or normalized(resp, sid) != normalized(on_missing[transport], missing):
                problems.append(
                    f"{what}: not answered like a missing session: {resp} vs {on_missing[transport]}"
                )
        elif RANK[access] < RANK[needs]:
            data = resp.get("error", {}).get("data", {})
            if verdict(resp) != "denied" or data != {"access": access, "needs": needs}:
                problems.append(f"{what}: not refused with -32014: {resp}")
        elif verdict(resp) != "passed":
            problems.append(f"{what}: refused: {resp}")
    return problems


async def test_listing_sse_and_metrics_show_each_principal_only_what_it_may_see(
    server_factory, workspace: Path, db_url: str
) -> None:
    async with server_factory(
        scripted({"text": "ok"}, loop=True),
        database_url=db_url,
        auth=AuthMode.TOKEN,
        workspace_grants={"alice": [str(workspace)], "olga": [str(workspace)]},
    ) as server:
        state = server.app.state.agentd
        tokens = {p: (await create_token(state.store, p, teams=teams))[0] for p, (teams, _) in ROLES.items()}
        clients = {p: await ws_as(server.base_url, t) for p, t in tokens.items()}
        try:
            alice = clients["alice"]
            sid = await shared_session(alice, workspace)
            private = await new_session(alice, workspace)
            olgas = await new_session(clients["olga"], workspace)
            await alice.call("session/prompt", text_prompt(sid, "hello"))

            for principal, (_, access) in ROLES.items():
                seen = await listed(clients[principal])
                assert private not in seen or principal == "alice", principal
                assert olgas not in seen or principal == "olga", principal
                assert (sid in seen) == (access != "none"), principal
            page = (await clients["wendy"].call("session/list", {}))["sessions"]
            (entry,) = [s for s in page if s["sessionId"] == sid]
            # What a member sees: owner and its own access, the session's state, and who
            # else is attached — by principal only (issue 17); never the shares.
            assert entry["_meta"]["agentd"] == {
                "owner": "alice",
                "access": "watch",
                "status": "idle",
                "queued": 0,
                "attached": [{"principal": "alice", "clients": 1}],
            }
            page = (await clients["dave"].call("session/list", {"cwd": str(workspace)}))["sessions"]
            assert [s["_meta"]["agentd"]["access"] for s in page if s["sessionId"] == sid] == ["drive"]
            page = (await alice.call("session/list", {}))["sessions"]
            (entry,) = [s for s in page if s["sessionId"] == sid]
            assert entry["_meta"]["agentd"] == {
                "owner": "alice",
                "access": "owner",
                "shares": [{"team": "core", "access": "watch"}, {"team": "crew", "access": "drive"}],
                "status": "idle",
                "queued": 0,
                "attached": [],  # alice's own connection is not someone else
            }

            async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as http:
                # SSE only reads: every member may, nobody else (a 404 like a missing session).
                for principal, (_, access) in ROLES.items():
                    headers = {"Authorization": f"Bearer {tokens[principal]}"}
                    if access == "none":
                        missing = f"sess_{uuid.uuid4().hex}"
                        refused = await http.get(f"/sessions/{sid}/events", headers=headers)
                        gone = await http.get(f"/sessions/{missing}/events", headers=headers)
                        assert refused.status_code == gone.status_code == 404, principal
                        assert refused.json()["detail"].replace(sid, "X") == gone.json()["detail"].replace(
                            missing, "X"
                        )
                    else:
                        async with sse(server.base_url, sid, headers=headers) as stream:
                            first = await stream.next()
                            assert first["event"] == "_agentd/session/snapshot", principal

                # /metrics: server-wide counts only, no session, principal or team names.
                text = (
                    await http.get("/metrics", headers={"Authorization": f"Bearer {tokens['nick']}"})
                ).text
                assert "agentd_sessions_live" in text
                for secret in (sid, private, olgas, "alice", "olga", "core", "crew"):
                    assert secret not in text, secret
        finally:
            for client in clients.values():
                await client.close()


async def test_only_the_owner_shares_and_only_with_its_own_teams(
    server_factory, workspace: Path, db_url: str
) -> None:
    async with server_factory(
        scripted({"text": "ok"}, loop=True),
        database_url=db_url,
        auth=AuthMode.TOKEN,
        workspace_grants={"alice": [str(workspace)]},
    ) as server:
        state = server.app.state.agentd
        tokens = {p: (await create_token(state.store, p, teams=teams))[0] for p, (teams, _) in ROLES.items()}
        alice = await ws_as(server.base_url, tokens["alice"])
        wendy = await ws_as(server.base_url, tokens["wendy"])
        try:
            sid = await new_session(alice, workspace)
            assert sid not in await listed(wendy)
            bad = await alice.request(SHARE, {"sessionId": sid, "team": "elsewhere", "access": "drive"})
            assert bad["error"]["code"] == -32602 and "core, crew" in bad["error"]["message"]
            bad = await alice.request(SHARE, {"sessionId": sid, "team": "core", "access": "owner"})
            assert bad["error"]["code"] == -32602

            shared = await alice.call(SHARE, {"sessionId": sid, "team": "core", "access": "drive"})
            assert shared == {"sessionId": sid, "shares": [{"team": "core", "access": "drive"}]}
            assert await state.store.session_shares([sid]) == {sid: {"core": "drive"}}  # stored
            await wendy.call("_agentd/prompt/enqueue", text_prompt(sid, "from wendy"))  # drives now
            # A driver may not re-share (not even to its own team) nor delete.
            refused = await wendy.request(SHARE, {"sessionId": sid, "team": "core", "access": "drive"})
            assert refused["error"]["code"] == DENIED
            assert refused["error"]["data"] == {"access": "drive", "needs": "owner"}

            await alice.call(SHARE, {"sessionId": sid, "team": "core", "access": "watch"})
            assert (await wendy.request("_agentd/prompt/enqueue", text_prompt(sid, "x")))["error"][
                "code"
            ] == DENIED
            closed = await alice.call(SHARE, {"sessionId": sid, "team": "core", "access": "none"})
            assert closed == {"sessionId": sid, "shares": []}
            gone = await wendy.request(ATTACH, {"sessionId": sid, "afterSeq": 0})
            assert gone["error"]["code"] == NOT_FOUND
            assert sid not in await listed(wendy)

            # The owner may close a share from a token in no team (not open one).
            await alice.call(SHARE, {"sessionId": sid, "team": "core", "access": "watch"})
            plain, _ = await create_token(state.store, "alice")
            alice_plain = await ws_as(server.base_url, plain)
            refused = await alice_plain.request(SHARE, {"sessionId": sid, "team": "ops", "access": "watch"})
            assert refused["error"]["code"] == -32602
            closed = await alice_plain.call(SHARE, {"sessionId": sid, "team": "core", "access": "none"})
            assert closed["shares"] == []
            await alice_plain.close()

            # Deleting the session drops its shares with it.
            await alice.call(SHARE, {"sessionId": sid, "team": "core", "access": "watch"})
            await alice.call("session/delete", {"sessionId": sid})
            assert await state.store.session_shares([sid]) == {}
        finally:
            await alice.close()
            await wendy.close()


async def test_a_watcher_is_never_asked_a_permission_question(server_factory, workspace: Path) -> None:
    """The driver and the owner are asked; the watcher, attached all along, sees the
    request as an event but gets no `session/request_permission` and cannot answer."""
    provider = scripted(
        {"text": "Writing.", "tool_calls": [write("call_w", "out.txt", "hi")]},
        {"text": "Done."},
    )
    async with server_factory(
        provider,
        auth=AuthMode.TOKEN,
        permission_mode=PermissionMode.DEFAULT,
        workspace_grants={"alice": [str(workspace)]},
    ) as server:
        state = server.app.state.agentd
        tokens = {p: (await create_token(state.store, p, teams=teams))[0] for p, (teams, _) in ROLES.items()}
        alice = await ws_as(server.base_url, tokens["alice"])
        wendy = await ws_as(server.base_url, tokens["wendy"])
        dave = await ws_as(server.base_url, tokens["dave"])
        try:
            sid = await shared_session(alice, workspace)
            await wendy.call("session/load", {"sessionId": sid, "cwd": "/elsewhere", "mcpServers": []})
            await dave.call(ATTACH, {"sessionId": sid, "afterSeq": 0})
            prompt = asyncio.create_task(dave.call("session/prompt", text_prompt(sid, "write it")))
            request = await asked(dave)
            await asked(alice)
            await round_trip(wendy)
            assert asks(wendy) == []
            requested = events(wendy, sid, "permission_requested")
            assert requested, "the watcher sees the request happen"
            respond = {"sessionId": sid, "requestId": requested[0]["requestId"], "optionId": "allow_once"}
            denied = await wendy.request("_agentd/permission/respond", respond)
            assert denied["error"]["code"] == DENIED
            assert not (workspace / "out.txt").exists()
            await answer(dave, request, "allow_once")
            assert (await prompt)["stopReason"] == "end_turn"
            assert (workspace / "out.txt").read_text() == "hi"
            # A watcher may not bring MCP servers into the session either.
            spec = [{"name": "x", "command": "/bin/true", "args": [], "env": []}]
            refused = await wendy.request("session/load", {"sessionId": sid, "cwd": "/", "mcpServers": spec})
            assert refused["error"]["code"] == DENIED
        finally:
            for client in (alice, wendy, dave):
                await client.close()


def of_session(client: WsClient, session_id: str) -> list[dict[str, Any]]:
    return [f for f in client.frames if f.get("params", {}).get("sessionId") == session_id]


def resyncs(client: WsClient, session_id: str) -> list[dict[str, Any]]:
    return [
        f["params"]
        for f in client.frames
        if f.get("method") == "_agentd/resync_required" and f["params"]["sessionId"] == session_id
    ]


async def test_lowering_a_share_detaches_members_who_lost_access(server_factory, workspace: Path) -> None:
    async with server_factory(
        scripted({"text": "ok"}, loop=True), auth=AuthMode.TOKEN, workspace_grants={"alice": [str(workspace)]}
    ) as server:
        state = server.app.state.agentd
        tokens = {p: (await create_token(state.store, p, teams=teams))[0] for p, (teams, _) in ROLES.items()}
        alice = await ws_as(server.base_url, tokens["alice"])
        wendy = await ws_as(server.base_url, tokens["wendy"])
        headers = {"Authorization": f"Bearer {tokens['wendy']}"}
        try:
            sid = await new_session(alice, workspace)
            await alice.call(SHARE, {"sessionId": sid, "team": "core", "access": "drive"})
            await wendy.call(ATTACH, {"sessionId": sid, "afterSeq": 0})
            async with sse(server.base_url, sid, headers=headers) as stream:
                await stream.until(lambda f: f.get("event") == "_agentd/session/snapshot")
                # drive -> watch: the WebSocket (which could be asked things) is detached...
                await alice.call(SHARE, {"sessionId": sid, "team": "core", "access": "watch"})
                await until(lambda: len(resyncs(wendy, sid)) == 1)
                assert resyncs(wendy, sid)[0]["reason"] == "access_changed"
                # ...and comes back as a watcher: it sees the session, may not drive it.
                await wendy.call(ATTACH, {"sessionId": sid, "afterSeq": 0})
                refused = await wendy.request("_agentd/prompt/enqueue", text_prompt(sid, "x"))
                assert refused["error"]["code"] == DENIED
                # watch -> none: both the WebSocket and the SSE stream end.
                await alice.call(SHARE, {"sessionId": sid, "team": "core", "access": "none"})
                await until(lambda: len(resyncs(wendy, sid)) == 2)
                last = await stream.until(lambda f: f.get("event") == "_agentd/resync_required")
                assert last["data"]["reason"] == "access_changed"
            # Detached for good: a new turn sends wendy nothing (it would have been queued to
            # her socket before the prompt's answer, so before the round trip's).
            seen = len(of_session(wendy, sid))
            await alice.call("session/prompt", text_prompt(sid, "after"))
            await round_trip(wendy)
            assert len(of_session(wendy, sid)) == seen
            gone = await wendy.request(ATTACH, {"sessionId": sid, "afterSeq": 0})
            assert gone["error"]["code"] == NOT_FOUND
        finally:
            await alice.close()
            await wendy.close()

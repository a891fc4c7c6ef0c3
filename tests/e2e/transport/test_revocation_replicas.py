"""Issue 28 item 3: revoking a token ends everything it holds open, on every replica — its
WebSockets (close 4401), SSE streams and Streamable HTTP event streams (`_agentd/token_revoked`
last, nothing after it), and a request forwarded to the replica owning a session and still
waiting there (answered -32000 `token_revoked`, its routed command withdrawn).

Two real `agentd serve` processes on one Postgres, tokens on, the default
`AGENTD_TOKEN_RECHECK_S`; the token is revoked the way `agentd token revoke` does it — another
process writing the database. Alice's session is owned by replica A; what she holds open is
on B (served from the log, or forwarded to A) and on A. Bob's token is untouched throughout.
Waits are bounded only to stop a hang: how fast it ends is bench/revocation.py's figure."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from agentd.store.db import Store
from agentd.store.routed import lease_holder
from agentd.transport.revocation import CloseCode
from tests.support.client import WsClient
from tests.support.polling import until
from tests.support.replicas import Replicas, two_replicas
from tests.support.session import new_session
from tests.support.sse import sse

pytestmark = pytest.mark.timeout(180)

LONG_TURN: list[dict[str, Any]] = [{"text": "working", "delay": 60}]  # until cancelled
REVOKED = "_agentd/token_revoked"
HANG_BOUND_S = 15


async def revoke(url: str, token: str) -> None:
    """As `agentd token revoke` does: another connection to the database."""
    store = await Store.open(url)
    try:
        [record] = [r for r in await store.list_tokens() if r.principal == "alice" and r.revoked_at is None]
        assert await store.revoke_token(record.id)
    finally:
        await store.close()


async def alices_session(replicas: Replicas, cwd: Path) -> tuple[str, str, str]:
    """Alice's and Bob's tokens, and a session of Alice's owned by replica A."""
    alice, bob = await replicas.tokens("alice", "bob")
    owner = await WsClient.connect(replicas.a.base_url, token=alice)
    try:
        sid = await new_session(owner, cwd)
    finally:
        await owner.close()
    store = await Store.open(replicas.url)
    try:
        assert await lease_holder(store.engine, sid) == "replica-a"
    finally:
        await store.close()
    return alice, bob, sid


def workspace_root(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    for principal in ("alice", "bob"):
        (root / principal).mkdir(parents=True)
    return root


async def test_websockets_on_both_replicas_close_4401(tmp_path: Path) -> None:
    root = workspace_root(tmp_path)
    async with two_replicas(tmp_path, LONG_TURN, auth="token", workspace_root=str(root)) as replicas:
        alice, bob, sid = await alices_session(replicas, root / "alice")
        on_a = await WsClient.connect(replicas.a.base_url, token=alice)
        on_b = await WsClient.connect(replicas.b.base_url, token=alice)  # watching from the log
        await on_b.call("_agentd/session/attach", {"sessionId": sid, "afterSeq": 0})
        bobs = await WsClient.connect(replicas.b.base_url, token=bob)
        await revoke(replicas.url, alice)
        async with asyncio.timeout(HANG_BOUND_S):
            await on_a.ws.wait_closed()
            await on_b.ws.wait_closed()
        for client in (on_a, on_b):
            assert client.ws.close_code == CloseCode.TOKEN_REVOKED
        assert (await bobs.call("session/list", {}))["sessions"] == []  # untouched
        await bobs.close()


async def test_sse_streams_on_both_replicas_end_with_token_revoked(tmp_path: Path) -> None:
    root = workspace_root(tmp_path)
    async with two_replicas(tmp_path, LONG_TURN, auth="token", workspace_root=str(root)) as replicas:
        alice, _bob, sid = await alices_session(replicas, root / "alice")
        headers = {"Authorization": f"Bearer {alice}"}
        async with (
            sse(replicas.a.base_url, sid, params={"after": 0}, headers=headers) as on_a,
            sse(replicas.b.base_url, sid, params={"after": 0}, headers=headers) as on_b,
        ):
            for stream in (on_a, on_b):
                await stream.until(lambda f: f.get("event") == "_agentd/session/snapshot")
            await revoke(replicas.url, alice)
            for stream in (on_a, on_b):
                await stream.until(lambda f: f.get("event") == REVOKED, within=HANG_BOUND_S)
                with pytest.raises(EOFError):  # and nothing after it: the stream ended
                    await stream.next(HANG_BOUND_S)


async def test_streamable_http_event_streams_on_both_replicas_end_with_token_revoked(tmp_path: Path) -> None:
    root = workspace_root(tmp_path)
    async with two_replicas(tmp_path, LONG_TURN, auth="token", workspace_root=str(root)) as replicas:
        alice, bob, sid = await alices_session(replicas, root / "alice")
        clients = [StreamableClient(server.base_url, alice, sid) for server in (replicas.a, replicas.b)]
        async with asyncio.TaskGroup() as tasks:
            for client in clients:
                tasks.create_task(client.run())
            async with asyncio.timeout(HANG_BOUND_S):
                for client in clients:
                    await client.live.wait()
            await revoke(replicas.url, alice)
        # Each stream ended by itself, its last message saying why.
        for client in clients:
            assert client.messages[-1] == {
                "jsonrpc": "2.0",
                "method": REVOKED,
                "params": {"reason": "token revoked"},
            }
            assert client.after_end == 401  # and the connection's token is refused from now on
        async with httpx.AsyncClient(base_url=replicas.b.base_url, timeout=30) as http:
            opened = await http.post("/acp", json=INIT, headers={"Authorization": f"Bearer {bob}"})
            assert opened.status_code == 200  # Bob is untouched


INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}


class StreamableClient:
    """ACP's Streamable HTTP client: initialize, attach the session, hold the event stream
    open until the server ends it."""

    def __init__(self, base_url: str, token: str, sid: str) -> None:
        self.base_url, self.token, self.sid = base_url, token, sid
        self.messages: list[dict[str, Any]] = []
        self.live = asyncio.Event()  # attached: the stream is live
        self.after_end = 0

    async def run(self) -> None:
        auth = {"Authorization": f"Bearer {self.token}"}
        async with httpx.AsyncClient(base_url=self.base_url, timeout=30, headers=auth) as http:
            opened = await http.post("/acp", json=INIT)
            assert opened.status_code == 200, opened.text
            conn = {"Acp-Connection-Id": opened.headers["Acp-Connection-Id"]}
            attach = {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "_agentd/session/attach",
                "params": {"sessionId": self.sid, "afterSeq": 0},
            }
            async with http.stream("GET", "/acp", headers={**conn, "Accept": "text/event-stream"}) as stream:
                assert stream.status_code == 200
                assert (await http.post("/acp", json=attach, headers=conn)).status_code == 202
                async with asyncio.timeout(HANG_BOUND_S * 2):
                    async for line in stream.aiter_lines():
                        if line.startswith("data: "):
                            self.messages.append(json.loads(line.removeprefix("data: ")))
                            if self.messages[-1].get("id") == 2:
                                self.live.set()
                    # The loop ends because the server ended the stream.
            self.after_end = (await http.post("/acp", json=attach, headers=conn)).status_code


async def test_a_request_forwarded_to_the_owner_is_withdrawn(tmp_path: Path) -> None:
    root = workspace_root(tmp_path)
    async with two_replicas(tmp_path, LONG_TURN, auth="token", workspace_root=str(root)) as replicas:
        alice, _bob, sid = await alices_session(replicas, root / "alice")
        prompt = {
            "jsonrpc": "2.0",
            "id": 9,
            "method": "session/prompt",
            "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "long job"}]},
        }
        store = await Store.open(replicas.url)
        try:

            async def routed_rows() -> int:
                async with store.engine.connect() as conn:
                    return int(
                        (await conn.execute(text("SELECT count(*) FROM routed_commands"))).scalar() or 0
                    )

            async with httpx.AsyncClient(base_url=replicas.b.base_url, timeout=60) as http:
                # POST /rpc on B: forwarded to A, waiting for the turn's end.
                waiting = asyncio.create_task(
                    http.post("/rpc", json=prompt, headers={"Authorization": f"Bearer {alice}"})
                )
                await until(routed_rows, what="the prompt is forwarded and waiting")
                await revoke(replicas.url, alice)
                async with asyncio.timeout(HANG_BOUND_S):
                    answer = await waiting
            error = answer.json()["error"]
            assert error["code"] == -32000 and error["data"]["reason"] == "token_revoked", error
            await until(lambda: _no_rows(routed_rows), what="the routed command is withdrawn")
        finally:
            await store.close()


async def _no_rows(count: Any) -> bool:
    return int(await count()) == 0

"""The cross-principal matrix: with tokens on, principal B calls every method of the
method table (`METHODS`) and every HTTP route with a `{session_id}` in its path against
principal A's session. Every call must be refused exactly as if the session did not exist,
A's session must be left unchanged (same snapshot, same last seq, same queue), and B's
listing never shows it.

The params come from each method's params model (field names → values, a typed default
for any field nobody foresaw), so a method added to the table is called without anyone
writing a template for it. A control call — the same params against a session B owns —
proves the refusal comes from the ownership check and not from the params.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentd.core.conversation import Message
from agentd.core.provider import ProviderRequest
from agentd.infra.auth import create_token
from agentd.infra.config import AuthMode
from agentd.protocol.agentd import ATTACH, DETACH, ENQUEUE
from agentd.transport.handlers import METHODS
from tests.support.client import WsClient, text_prompt
from tests.support.polling import value_of
from tests.support.principals import (
    CALL_BOUND_S,
    NOT_FOUND,
    bounded,
    listed,
    normalized,
    params_for,
    targets_a_session,
    ws_as,
)
from tests.support.server import scripted
from tests.support.session import new_session

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(300)]

HOLD = "[hold]"
# Methods that answer a stranger's session id with a result rather than an error — the
# same result as for a session that does not exist, so nothing is revealed or changed.
ANSWERS_LIKE_MISSING = {DETACH: "detaching from a session the connection is not attached to is a no-op"}


class HoldingProvider:
    """Answers "ok" at once, except a prompt containing HOLD, whose turn waits (before any
    output) until released: A's session stays running with a stable queue behind it."""

    name = "scripted"
    supports_native_schema = False

    def __init__(self) -> None:
        self.inner = scripted({"text": "ok"}, loop=True)
        self.release = asyncio.Event()

    async def stream(self, request: ProviderRequest) -> Any:
        last = next((m for m in reversed(request.messages) if m.role == "user"), Message.user(""))
        if HOLD in str(last.content):
            await self.release.wait()
        async for event in self.inner.stream(request):
            yield event


async def test_no_method_or_endpoint_lets_one_principal_touch_anothers_session(
    server_factory, workspace: Path, db_url: str
) -> None:
    provider = HoldingProvider()
    async with server_factory(
        provider,
        database_url=db_url,
        auth=AuthMode.TOKEN,
        rate_limit_per_s=0,
        # Both may use the test's workspace: the matrix is about sessions, not folders.
        workspace_grants={"alice": [str(workspace)], "bob": [str(workspace)]},
    ) as server:
        state = server.app.state.agentd
        # In teams, but not one team: nothing of alice's is shared with bob (R-X2).
        alice_token, _ = await create_token(state.store, "alice", teams=["ops"])
        bob_token, _ = await create_token(state.store, "bob", teams=["core"])
        alice = await ws_as(server.base_url, alice_token)
        bob = await ws_as(server.base_url, bob_token)
        http = httpx.AsyncClient(base_url=server.base_url, timeout=CALL_BOUND_S)
        bob_http = {"Authorization": f"Bearer {bob_token}"}
        try:
            # A's session: a turn held running, two prompts queued behind it.
            sid_a = (await alice.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
            for text in (f"{HOLD} long task", "queued one", "queued two"):
                await alice.call(ENQUEUE, text_prompt(sid_a, text))

            async def a_state() -> dict[str, Any]:
                """A's session as its owner sees it (a fresh connection's snapshot) and as stored."""
                await state.writer.barrier()
                last = await state.store.last_seq(sid_a)
                viewer = await ws_as(server.base_url, alice_token)
                try:
                    attached = await bounded(viewer.request(ATTACH, {"sessionId": sid_a, "afterSeq": last}))
                finally:
                    await viewer.close()
                snapshot = attached.get("result", attached)  # an error here is a change too
                record = await state.store.get_session(sid_a)
                fields = ("owner", "cwd", "title", "mode", "goal", "queue", "agent")
                stored = {k: getattr(record, k) for k in fields} if record else None
                return {"snapshot": snapshot, "stored": stored, "lastSeq": last}

            async def settled() -> dict[str, Any] | None:
                current = await a_state()
                snap = current["snapshot"]["snapshot"]
                return current if snap["status"] == "running" and len(snap["queue"]) == 2 else None

            before = await value_of(settled, CALL_BOUND_S, what="the setup to settle")

            called: set[str] = set()
            problems: list[str] = []
            for method in METHODS:
                called.add(method)
                missing = f"sess_{uuid.uuid4().hex}"
                if not targets_a_session(method):
                    # initialize, authenticate, session/new, session/list: B's own business;
                    # nothing of A's may show or change.
                    resp = await bounded(bob.request(method, params_for(method, missing, workspace)))
                    if sid_a in json.dumps(resp):
                        problems.append(f"{method}: B's answer names A's session: {resp}")
                else:
                    problems += await probe(method, bob, http, bob_http, sid_a, missing, workspace)
                after = await a_state()
                if after != before:
                    problems.append(f"{method}: A's session changed: {before} -> {after}")
            assert not problems, "\n".join(problems)
            assert called == set(METHODS)  # every method of the table, templates or not

            # HTTP routes that name a session in their path (SSE today, whatever comes next),
            # from the app's own route table as OpenAPI describes it.
            paths = {p: ops for p, ops in server.app.openapi()["paths"].items() if "{session_id}" in p}
            assert paths, "no HTTP route with {session_id}: the route matrix would be vacuous"
            twin = await bounded(new_session(bob, workspace))
            for path, operations in paths.items():
                for verb in sorted(operations):
                    refused = await http.request(verb, path.replace("{session_id}", sid_a), headers=bob_http)
                    gone = await http.request(
                        verb, path.replace("{session_id}", f"sess_{uuid.uuid4().hex}"), headers=bob_http
                    )
                    assert refused.status_code in (403, 404), (verb, path, refused.text)
                    assert refused.status_code == gone.status_code, (verb, path)
                    # The control: B's own session is served on the same route.
                    async with http.stream(verb, path.replace("{session_id}", twin), headers=bob_http) as own:
                        assert own.status_code < 400, (verb, path, own.status_code)
            assert await a_state() == before

            assert sid_a not in await listed(bob)
            assert sid_a not in await listed(bob, cwd=str(workspace))
            assert sid_a in await listed(alice)
        finally:
            provider.release.set()
            await http.aclose()
            await alice.close()
            await bob.close()


async def probe(
    method: str,
    bob: WsClient,
    http: httpx.AsyncClient,
    bob_http: dict[str, str],
    sid_a: str,
    missing: str,
    workspace: Path,
) -> list[str]:
    """B calls `method` on A's session, on a missing one, and on its own (the control),
    over the WebSocket and — unless the method needs one — over `POST /rpc`."""
    problems = []
    answers = {
        "ws": (
            await bounded(bob.request(method, params_for(method, sid_a, workspace))),
            await bounded(bob.request(method, params_for(method, missing, workspace))),
        )
    }
    if not METHODS[method].needs_connection:
        bodies = [
            {"jsonrpc": "2.0", "id": 1, "method": method, "params": params_for(method, sid, workspace)}
            for sid in (sid_a, missing)
        ]
        on_a, on_missing = [(await http.post("/rpc", json=b, headers=bob_http)).json() for b in bodies]
        answers["http"] = (on_a, on_missing)
    for transport, (on_a, on_missing) in answers.items():
        if method in ANSWERS_LIKE_MISSING:
            refused = "result" in on_a
        else:
            refused = on_a.get("error", {}).get("code") == NOT_FOUND
        if not refused:
            problems.append(f"{method} over {transport}: not refused: {on_a}")
        elif normalized(on_a, sid_a) != normalized(on_missing, missing):
            problems.append(
                f"{method} over {transport}: A's session answers {on_a}, a missing one {on_missing}"
            )
    # The control: the same params on a session B owns are accepted, so the refusal above
    # came from the ownership check.
    twin = await bounded(new_session(bob, workspace))
    own = await bounded(bob.request(method, params_for(method, twin, workspace)))
    error = own.get("error", {})
    # `_agentd/permission/respond` on B's own session names a request that is not pending,
    # `_agentd/session/rewind` a turn that is not one of the session's: answered only after
    # the session was found and is B's, so it proves the check too.
    message = str(error.get("message", ""))
    # `_agentd/session/revert_file` a file the session did not change.
    passed = ("no pending permission request", "not a turn of this session", "did not change it")
    past_the_check = any(p in message for p in passed)
    if error.get("code") in (NOT_FOUND, -32602, -32600) and not past_the_check:
        problems.append(f"{method}: the control on B's own session failed, the probe proves nothing: {own}")
    return problems


# The matrix must not silently shrink: these are the methods it is known to see today.
def test_the_matrix_is_generated_from_the_method_table() -> None:
    for method in METHODS:
        params = params_for(method, "sess_x", Path("/tmp"))
        model = METHODS[method].params
        if model is not None:
            model.model_validate(params)  # every generated template passes the params model
    assert {"session/prompt", "session/load", ENQUEUE, ATTACH, "_agentd/session/fork"} <= set(METHODS)

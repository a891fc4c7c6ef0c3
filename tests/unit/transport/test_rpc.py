"""The one JSON-RPC path (agentd/transport/rpc.py), without a server: decoding, the envelope,
the initialize gate, params validation, error mapping, batches and the rate limit."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from agentd.infra.config import AuthMode
from agentd.protocol.jsonrpc import ErrorCode, RpcError
from agentd.protocol.methods import Served
from agentd.transport import rpc
from agentd.transport.rpc import (
    CallContext,
    Dispatcher,
    Method,
    raw_id,
    read_message,
    response_problem,
)
from tests.support.rpc_methods import nothing, rpc_methods


@pytest.fixture(autouse=True, params=[True, False], ids=["hand-envelope", "pydantic-envelope"])
def _envelope_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test here runs on both envelope paths (`rpc.HAND_ENVELOPE`)."""
    monkeypatch.setattr(rpc, "HAND_ENVELOPE", request.param)


DISPATCHER = Dispatcher(
    {
        **rpc_methods(),
        Served.INITIALIZE: Method(None, nothing),
        Served.SESSION_CANCEL: Method(None, nothing),
    },
    {"logout": "not offered here"},
)


@dataclass
class FakeLimiter:
    wait: float | None = None
    keys: list[str] = field(default_factory=list)

    def allow(self, key: str, cost: float = 1.0) -> float | None:
        self.keys.append(key)
        return self.wait


def context(*, wait: float | None = None, connection: Any = None, depth: int = 64) -> CallContext:
    state = SimpleNamespace(
        settings=SimpleNamespace(
            max_json_depth=depth, rate_limit_per_s=10, max_prompt_blocks=1000, request_deadline_s=30.0
        ),
        rate_limiter=FakeLimiter(wait),
        auth=SimpleNamespace(mode=AuthMode.NONE),
    )
    return CallContext(state=state, principal="local", connection=connection, remote="127.0.0.1")  # type: ignore[arg-type]


def req(method: str, params: Any = None, id: Any = 1) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = params
    if id is not None:
        msg["id"] = id
    return msg


# --------------------------------------------------------------------------- decoding


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b'{"a": 1}', {"a": 1}),
        ('[{"a": 1}]', [{"a": 1}]),
        ("1", 1),
        ("[1]", [1]),
        ("{", (ErrorCode.PARSE_ERROR, "Parse error: ")),
        (b"", (ErrorCode.PARSE_ERROR, "Parse error: ")),
        ("[]", (ErrorCode.INVALID_REQUEST, "empty batch")),
    ],
)
def test_read_message(data: str | bytes, expected: Any) -> None:
    got = read_message(data)
    if isinstance(expected, tuple):
        assert isinstance(got, RpcError)
        assert got.code == expected[0] and got.message.startswith(expected[1])
    else:
        assert got == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [({"id": 3}, 3), ({"id": "a"}, "a"), ({"id": True}, None), ({"id": 1.5}, None), ({}, None), ([1], None)],
)
def test_raw_id(raw: Any, expected: Any) -> None:
    assert raw_id(raw) == expected


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ({"id": 1, "result": {}}, None),
        ({"id": None, "error": {"code": -1, "message": "x"}}, None),
        ({"id": [1], "result": {}}, "a response id must be an integer, a string or null, not list"),
        ({"id": True, "result": {}}, "not bool"),
        ({"id": 1, "error": "bad"}, "error must be an object"),
        ({"id": 1, "error": {"code": "1"}}, "error code must be an integer"),
        ({"id": 1, "error": {"code": True}}, "error code must be an integer"),
    ],
)
def test_response_problem(raw: dict[str, Any], problem: str | None) -> None:
    got = response_problem(raw)
    if problem is None:
        assert got is None
    else:
        assert got is not None and problem in got


# --------------------------------------------------------------------------- one message

CASES: list[tuple[str, Any, Any]] = [
    ("result", req("echo", {"text": "hi"}), {"result": {"text": "hi"}}),
    ("null result is {}", req("nothing"), {"result": {}}),
    ("notification", req("echo", {"text": "hi"}, id=None), None),
    ("notification error is silent", req("crash", id=None), None),
    ("unknown", req("nope"), (ErrorCode.METHOD_NOT_FOUND, "Method not found: nope")),
    (
        "unsupported",
        req("logout"),
        (ErrorCode.METHOD_NOT_FOUND, "Method not found: logout is not supported: not offered here"),
    ),
    (
        "needs a connection",
        req("live"),
        (ErrorCode.INVALID_REQUEST, "live needs a WebSocket connection (GET /acp)"),
    ),
    (
        "params not an object",
        req("echo", [1]),
        (ErrorCode.INVALID_PARAMS, "Invalid params: expected an object"),
    ),
    (
        "params missing field",
        req("echo", {}),
        (ErrorCode.INVALID_PARAMS, "Invalid params: text: Field required"),
    ),
    ("params omitted", req("echo"), (ErrorCode.INVALID_PARAMS, "Invalid params: text: Field required")),
    ("handler error", req("refuse"), (ErrorCode.RESOURCE_NOT_FOUND, "Resource not found: x")),
    ("handler crash", req("crash"), (ErrorCode.INTERNAL_ERROR, "Internal error while handling crash")),
    (
        "not an object",
        5,
        (ErrorCode.INVALID_REQUEST, "Invalid Request: a JSON-RPC message must be an object"),
    ),
    (
        "bad version",
        {"jsonrpc": "1.0", "method": "echo", "id": 1},
        (ErrorCode.INVALID_REQUEST, "Invalid Request"),
    ),
    ("extra key", {**req("echo", {"text": "x"}), "extra": 1}, (ErrorCode.INVALID_REQUEST, "Invalid Request")),
]


@pytest.mark.parametrize(("raw", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
async def test_handle(raw: Any, expected: Any) -> None:
    resp = await DISPATCHER.handle(raw, context())
    if expected is None:
        assert resp is None
    elif "result" in expected:
        assert resp == {"jsonrpc": "2.0", "id": 1, **expected}
    else:
        assert resp is not None and resp["jsonrpc"] == "2.0" and "result" not in resp
        assert resp["error"]["code"] == expected[0]
        assert resp["error"]["message"] == expected[1]


async def test_too_deep_is_refused_before_the_envelope() -> None:
    resp = await DISPATCHER.handle(req("echo", {"text": {"a": {"b": [1]}}}), context(depth=3))
    assert resp is not None and resp["error"]["code"] == ErrorCode.INVALID_REQUEST and resp["id"] == 1


@pytest.mark.parametrize(
    ("method", "limited"), [("echo", True), ("nothing", True), (Served.SESSION_CANCEL, False)]
)
async def test_rate_limit_spares_cancel(method: str, limited: bool) -> None:
    params = {"text": "x"} if method == "echo" else None
    resp = await DISPATCHER.handle(req(method, params), context(wait=0.5))
    assert resp is not None
    if limited:
        assert resp["error"]["code"] == ErrorCode.LIMIT_EXCEEDED
        assert resp["error"]["data"]["retryAfter"] == 0.5
    else:
        assert "result" in resp


# --------------------------------------------------------------------------- initialize gate


@pytest.mark.parametrize(
    ("initialized", "raw", "outcome"),
    [
        (False, req("echo", {"text": "x"}, id=4), "refused"),
        (False, req("echo", {"text": "x"}, id=None), "silent"),
        (False, req(Served.INITIALIZE, {}, id=4), "answered"),
        (False, {"jsonrpc": "2.0", "id": 4}, "invalid"),  # not well formed: the envelope error wins
        (True, req("echo", {"text": "x"}, id=4), "answered"),
    ],
)
async def test_initialize_gate_on_a_connection(initialized: bool, raw: Any, outcome: str) -> None:
    conn = SimpleNamespace(id="conn_1", initialized=initialized)
    resp = await DISPATCHER.handle(raw, context(connection=conn))
    if outcome == "silent":
        assert resp is None
    elif outcome == "answered":
        assert resp is not None and "result" in resp
    else:
        assert resp is not None and resp["error"]["code"] == ErrorCode.INVALID_REQUEST
        first = resp["error"]["message"] == "Invalid Request: `initialize` must be the first request"
        assert first == (outcome == "refused")


async def test_no_gate_without_a_connection() -> None:
    resp = await DISPATCHER.handle(req("echo", {"text": "x"}), context())
    assert resp is not None and "result" in resp


# --------------------------------------------------------------------------- batches


@pytest.mark.parametrize(
    ("raw", "ids"),
    [
        ([req("echo", {"text": "a"}, id=1), req("nothing", id=None), req("nope", id=2)], [1, 2]),
        ([req("nothing", id=None), req("nothing", id=None)], None),
        (req("echo", {"text": "a"}, id=9), 9),
        (req("nothing", id=None), None),
    ],
)
async def test_answer(raw: Any, ids: Any) -> None:
    resp = await DISPATCHER.answer(raw, context())
    if ids is None:
        assert resp is None
    elif isinstance(ids, list):
        assert isinstance(resp, list) and [r["id"] for r in resp] == ids
    else:
        assert isinstance(resp, dict) and resp["id"] == ids

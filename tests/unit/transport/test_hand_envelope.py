"""The JSON-RPC envelope told by hand (agentd/transport/rpc.py `HAND_ENVELOPE`): every message
gets the answer pydantic's `Request` path gives it, word for word, and a well-formed one builds
no `Request` (one is made only to route a request to its session's owner)."""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any, cast

import pytest

from agentd.infra.config import AuthMode
from agentd.protocol import Request
from agentd.session import SessionError, SessionErrorKind
from agentd.transport import rpc
from agentd.transport.rpc import CallContext, Dispatcher, Method, _plain_envelope
from tests.support.rpc_methods import rpc_methods

DISPATCHER = Dispatcher(
    rpc_methods(),
    {"logout": "not offered here"},
)


def context() -> CallContext:
    settings = SimpleNamespace(
        max_json_depth=64, rate_limit_per_s=10, max_prompt_blocks=1000, request_deadline_s=30.0
    )
    limiter = SimpleNamespace(allow=lambda key, cost=1.0: None)
    state = SimpleNamespace(settings=settings, rate_limiter=limiter, auth=SimpleNamespace(mode=AuthMode.NONE))
    return CallContext(state=cast(Any, state), principal="local", remote="127.0.0.1")


# Values each envelope field may take: the valid ones and near misses pydantic judges.
FIELDS: dict[str, list[Any]] = {
    "jsonrpc": ["2.0", "2.0\n", "2", 2.0, None, "1.0", ["2.0"]],
    "method": ["echo", "nothing", "refuse", "crash", "nope", "logout", "live", 5, None, "", ["echo"]],
    "params": [{"text": "hi"}, {}, {"text": 3}, [1], [], None, "x", 0, True],
    "id": [1, "a", 0, -7, 2**70, None, True, False, 1.0, 1.5, [1], {"a": 1}],
    "extra": [1],
}


def envelopes(n: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        raw: dict[str, Any] = {}
        for key, values in FIELDS.items():
            # Each field present most of the time (the extra one rarely): missing ones too.
            if rng.random() < (0.15 if key == "extra" else 0.85):
                raw[key] = rng.choice(values)
        out.append(raw)
    return out


def accepted_by_pydantic(raw: dict[str, Any]) -> Request | None:
    try:
        return Request.model_validate(raw)
    except Exception:
        return None


@pytest.mark.parametrize("seed", range(4))
async def test_every_envelope_gets_the_pydantic_answer(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    for raw in envelopes(400, seed):
        monkeypatch.setattr(rpc, "HAND_ENVELOPE", False)
        expected = await DISPATCHER.handle(dict(raw), context())
        monkeypatch.setattr(rpc, "HAND_ENVELOPE", True)
        assert await DISPATCHER.handle(dict(raw), context()) == expected, raw


@pytest.mark.parametrize("seed", range(4))
def test_plain_only_what_pydantic_takes_unchanged(seed: int) -> None:
    """`_plain_envelope` says yes only where `Request` accepts the message with the same
    method, params and id (never a coerced float id, never an extra key)."""
    seen = {True: 0, False: 0}
    for raw in envelopes(600, seed):
        plain = _plain_envelope(raw)
        seen[plain] += 1
        if plain:
            parsed = accepted_by_pydantic(raw)
            assert parsed is not None, raw
            expected = (raw["method"], raw.get("params"), raw.get("id"))
            assert (parsed.method, parsed.params, parsed.id) == expected
            assert type(parsed.id) is type(raw.get("id"))
    assert seen[True] and seen[False]  # both kinds were generated


async def test_a_plain_request_builds_no_request(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(raw: Any) -> Any:
        raise AssertionError("a Request was built")

    monkeypatch.setattr(rpc, "_REQUEST", refuse)
    monkeypatch.setattr(rpc, "HAND_ENVELOPE", True)
    raw = {"jsonrpc": "2.0", "id": 3, "method": "echo", "params": {"text": "hi"}}
    assert await DISPATCHER.handle(raw, context()) == {"jsonrpc": "2.0", "id": 3, "result": {"text": "hi"}}


@pytest.mark.parametrize("hand", [True, False])
async def test_owned_elsewhere_is_routed(hand: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rpc, "HAND_ENVELOPE", hand)

    async def elsewhere(ctx: CallContext, params: Any) -> None:
        raise SessionError(SessionErrorKind.OWNED_ELSEWHERE, "elsewhere", {})

    routed: list[Request] = []

    async def route(ctx: CallContext, request: Request, exc: SessionError) -> Any:
        routed.append(request)
        return {"owner": "b"}

    dispatcher = Dispatcher({"prompt": Method(None, elsewhere)})
    raw = {"jsonrpc": "2.0", "id": "r1", "method": "prompt", "params": {"sessionId": "s"}}
    assert await dispatcher.handle(raw, context()) is not None  # no route: the session's error
    dispatcher.route = route
    assert await dispatcher.handle(raw, context()) == {"jsonrpc": "2.0", "id": "r1", "result": {"owner": "b"}}
    assert routed == [Request.model_validate(raw)]

"""Hypothesis strategies for hostile JSON-RPC frames: broken JSON, wrong types, deep
nesting, big payloads, unknown methods, responses with odd ids, batches, notifications,
and the method table's own methods with fuzzed params (field names from each params
model, values mixing the valid and the absurd)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from agentd.transport.handlers import METHODS

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    INT64,
    st.integers(),  # beyond 64 bits too: a parser may refuse them
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
REQUEST_IDS = st.one_of(INT64, st.text(max_size=20))
CONTAINERS = st.one_of(
    st.lists(SCALARS, max_size=3), st.dictionaries(st.text(max_size=5), SCALARS, max_size=3)
)
ANY_IDS = st.one_of(REQUEST_IDS, st.none(), st.booleans(), st.floats(allow_nan=False), CONTAINERS)
# Ids a *response* frame may carry: any JSON value (an object/list id once closed the
# connection; it is answered -32600 now).
HASHABLE_IDS = ANY_IDS


def nested(depth: int, leaf: Any = 0) -> Any:
    value = leaf
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


def params_strategy(method: str, session_ids: list[str], workspace: str) -> st.SearchStrategy[Any]:
    """Params for a known method: every field of its model optionally present, each
    either plausible or junk; sometimes not an object at all."""
    model = METHODS[method].params
    text_blocks = st.lists(
        st.fixed_dictionaries({"type": st.sampled_from(["text", "image", "resource", "bogus"])}, optional={
            "text": st.text(max_size=200), "data": VALUES, "resource": VALUES,
        }),
        max_size=3,
    )  # fmt: skip
    by_name: dict[str, st.SearchStrategy[Any]] = {
        "session_id": st.one_of(st.sampled_from(session_ids), st.text(max_size=40), VALUES),
        "prompt": st.one_of(text_blocks, VALUES),
        # NULs included (they must be -32602); never a stdio MCP spec: a fuzzed "command"
        # could start any program on this machine.
        "cwd": st.one_of(
            st.just(workspace),
            st.text(max_size=30).map(lambda t: "/" + t),
            st.text(max_size=30),
            st.none(),
            INT64,
        ),
        "mcp_servers": st.one_of(st.just([]), SCALARS),
        "after_seq": st.one_of(INT64, VALUES),
        "up_to_seq": st.one_of(INT64, VALUES),
        "expected_version": st.one_of(INT64, VALUES),
    }
    fields: dict[str, st.SearchStrategy[Any]] = {}
    if model is not None:
        for name, info in model.model_fields.items():
            if name == "verify":
                continue  # a goal's verify command runs in the shell
            fields[info.alias or name] = by_name.get(name, VALUES)
    return st.one_of(st.fixed_dictionaries({}, optional=fields), VALUES)


def request_frames(session_ids: list[str], workspace: str) -> st.SearchStrategy[dict[str, Any]]:
    """Well-formed envelopes of the table's methods with fuzzed params."""
    return st.sampled_from(sorted(METHODS)).flatmap(
        lambda m: st.fixed_dictionaries(
            {
                "jsonrpc": st.just("2.0"),
                "method": st.just(m),
                "params": params_strategy(m, session_ids, workspace),
            },
            optional={"id": REQUEST_IDS},
        )
    )


def envelopes() -> st.SearchStrategy[dict[str, Any]]:
    """Envelopes with any field of any type, known or unknown method names."""
    return st.fixed_dictionaries(
        {},
        optional={
            "jsonrpc": st.one_of(st.just("2.0"), st.just("1.0"), VALUES),
            "id": ANY_IDS,
            "method": st.one_of(st.sampled_from(sorted(METHODS)), st.text(max_size=30), VALUES),
            "params": VALUES,
            "extra": VALUES,
        },
    )


def responses(ids: st.SearchStrategy[Any] = HASHABLE_IDS) -> st.SearchStrategy[dict[str, Any]]:
    """Response-shaped frames (a client answering a request nobody sent, or badly)."""
    error = st.one_of(VALUES, st.fixed_dictionaries({"code": VALUES}, optional={"message": VALUES}))
    return st.one_of(
        st.fixed_dictionaries({"jsonrpc": st.just("2.0"), "id": ids, "result": VALUES}),
        st.fixed_dictionaries({"jsonrpc": st.just("2.0"), "id": ids, "error": error}),
    )


def frames(session_ids: list[str], workspace: str) -> st.SearchStrategy[str | bytes]:
    """One WebSocket frame / HTTP body: text (mostly) or bytes. Requests of the method
    table come up most often: valid envelopes with hostile params go deepest."""
    requests = request_frames(session_ids, workspace)
    objects = st.one_of(requests, envelopes(), responses())
    truncated = objects.map(json.dumps).flatmap(
        lambda t: st.integers(0, max(0, len(t) - 1)).map(lambda n: t[:n])
    )
    fixed_junk = [
        "",
        "{",
        "[",
        "[{]",
        '{"jsonrpc": "2.0", "id": 1,}',
        "NaN",
        "nul\x00l",
        "\ufeff{}",
        "[]",
        "[[]]",
    ]
    deep = st.integers(40, 90).map(
        lambda d: json.dumps({"jsonrpc": "2.0", "id": "deep", "method": "session/list", "params": nested(d)})
    )
    big = st.integers(10_000, 1_500_000).map(
        lambda n: json.dumps(
            {"jsonrpc": "2.0", "id": "big", "method": "_agentd/nope", "params": {"x": "a" * n}}
        )
    )
    return st.one_of(
        requests.map(json.dumps),
        requests.map(json.dumps),
        requests.map(json.dumps),
        envelopes().map(json.dumps),
        responses().map(json.dumps),
        st.lists(objects, min_size=1, max_size=5).map(json.dumps),  # batches
        VALUES.map(json.dumps),
        st.sampled_from(fixed_junk),
        st.text(max_size=60),
        truncated,
        deep,
        big,
        st.binary(max_size=64),
    )


def expected_response_id(text: str | bytes) -> Any:
    """The id a response must carry if the frame is a single request with a usable id
    (None when no response is owed or it cannot be correlated)."""
    if isinstance(text, bytes):
        return None
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(raw, dict) or ("method" not in raw and ("result" in raw or "error" in raw)):
        return None
    value = raw.get("id")
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return None
    if isinstance(value, int) and not -(2**63) <= value < 2**64:
        return None  # not parseable by the server's JSON parser: a parse error with id null
    return value

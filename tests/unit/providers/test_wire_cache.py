"""The providers' encoded request bodies (`encode_body`, the conversation's bytes reused
per session) are byte for byte what the plain body encoded as before gives — httpx's
`json=` (the stdlib, compact, ensure_ascii=False) — request after request while the
history grows, is edited or compacted; and only the new messages are encoded."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentd.core.conversation import Image, Message, ReasoningBlock, ToolCall
from agentd.core.errors import ErrorKind, HarnessError
from agentd.core.provider import ProviderRequest, ToolSpec
from agentd.infra.config import ReasoningEffort
from agentd.providers import wire_cache
from agentd.providers.anthropic.provider import AnthropicProvider
from agentd.providers.openai import chat as openai_module
from agentd.providers.openai import responses as responses_module
from agentd.providers.openai.chat import OpenAIProvider
from agentd.providers.openai.responses import OpenAIResponsesProvider
from agentd.providers.wire_cache import EncodedMessages

_TEXT = st.sampled_from(
    ["", "hi", "  ", 'quote " back \\ slash', "tab\tnew\nline\x00\x1f\x7f", "é ü 漢字 🙂 \u2028"]
)
_ID = st.sampled_from(["call_1", "call_2", "toolu_x"])
_message = st.one_of(
    st.builds(Message.system, _TEXT),
    st.builds(
        Message.user,
        _TEXT,
        st.lists(st.builds(Image, mime_type=st.just("image/png"), data=st.just("iVBORw0=")), max_size=2),
    ),
    st.builds(
        lambda text, calls, blocks: Message(
            role="assistant", content=text, reasoning="thought", tool_calls=calls, reasoning_blocks=blocks
        ),
        _TEXT,
        st.lists(
            st.builds(
                ToolCall, id=_ID, name=st.just("bash"), arguments=st.sampled_from(["{}", '{"a": 1.5}', "x"])
            ),
            max_size=2,
        ),
        st.lists(
            st.sampled_from(
                [
                    ReasoningBlock(
                        provider="openai-responses", data={"type": "reasoning", "encrypted_content": "e"}
                    ),
                    ReasoningBlock(
                        provider="anthropic", data={"type": "thinking", "thinking": "t", "signature": "s"}
                    ),
                    ReasoningBlock(provider="anthropic", data={"type": "redacted_thinking", "data": "d"}),
                ]
            ),
            max_size=2,
        ),
    ),
    st.builds(
        lambda cid, text, err: Message(
            role="tool", content=text, tool_call_id=cid, name="bash", is_error=err
        ),
        _ID,
        _TEXT,
        st.booleans(),
    ),
)
_edit = st.one_of(
    st.tuples(st.just("append"), st.lists(_message, min_size=1, max_size=4)),
    st.tuples(st.just("replace"), st.integers(0, 20), st.lists(_message, max_size=3)),
    st.tuples(st.just("compact"), st.integers(0, 20)),
    st.tuples(st.just("copy")),
)
TOOLS = [
    ToolSpec("bash", "Run a command.", {"type": "object", "properties": {"command": {"type": "string"}}})
]


def _apply(history: list[Message], edit: tuple[Any, ...]) -> list[Message]:
    match edit:
        case ("append", extra):
            return [*history, *extra]
        case ("replace", k, extra):
            return [*history[:k], *extra]
        case ("compact", k):
            return [Message(role="user", content="summary", tag="compaction_summary"), *history[k:]]
        case _:
            return [m.model_copy() for m in history]


def _as_before(body: dict[str, Any]) -> bytes:
    """How httpx's `json=` encoded the plain body."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def _providers() -> list[Any]:
    return [
        OpenAIProvider(base_url="http://127.0.0.1:9/v1", api_key="k", model="gpt-test"),
        OpenAIResponsesProvider(base_url="http://127.0.0.1:9/v1", api_key="k", model="o4-mini"),
        AnthropicProvider(api_key="k", model="claude-test"),
        AnthropicProvider(api_key="k", model="claude-test", thinking_budget=2048),
        AnthropicProvider(api_key="k", model="claude-test", prompt_cache=False, adaptive_thinking=True),
    ]


def _check(provider: Any, request: ProviderRequest) -> None:
    wire = provider.encode_body(request)
    plain = provider.build_body(request)
    assert wire == _as_before(plain)
    assert wire == orjson.dumps(plain)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(_edit, min_size=1, max_size=10),
    st.sampled_from(["", "You are terse."]),
    st.sampled_from([TOOLS, []]),
    st.booleans(),
)
def test_encoded_bodies_equal_the_plain_bodies_after_every_edit(
    edits: list[tuple[Any, ...]], system: str, tools: list[ToolSpec], reasoning: bool
) -> None:
    _edit_and_check(edits, system, tools, reasoning)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(_edit, min_size=1, max_size=12),
    st.sampled_from(["", "You are terse."]),
    st.sampled_from([0, 1, 30]),
    st.booleans(),
)
def test_encoded_bodies_equal_the_plain_bodies_with_small_segments(
    edits: list[tuple[Any, ...]], system: str, segment: int, reasoning: bool
) -> None:
    # Every few messages close a segment (OpenAI, Responses, Anthropic entries alike).
    saved, wire_cache.SEGMENT_BYTES = wire_cache.SEGMENT_BYTES, segment
    try:
        _edit_and_check(edits, system, TOOLS, reasoning)
    finally:
        wire_cache.SEGMENT_BYTES = saved


def _edit_and_check(
    edits: list[tuple[Any, ...]], system: str, tools: list[ToolSpec], reasoning: bool
) -> None:
    providers = _providers()
    history: list[Message] = []
    for edit in edits:
        history = _apply(history, edit)
        for session in ("s1", None):
            request = ProviderRequest(
                model="",
                system=system,
                messages=list(history),
                tools=tools,
                session_id=session,
                extended_reasoning=reasoning,
            )
            for provider in providers:
                _check(provider, request)
                _check(provider, request)  # the same request again (a retry)


@pytest.mark.parametrize("module", [openai_module, responses_module])
def test_only_the_new_messages_are_encoded(module: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    encoded: list[Message] = []
    real = module._encode_message
    monkeypatch.setattr(module, "_encode_message", lambda m: encoded.append(m) or real(m))
    provider = _providers()[0 if module is openai_module else 1]
    history = [Message.user(f"u{i}") for i in range(200)]
    provider.encode_body(ProviderRequest(model="", system="s", messages=list(history), session_id="s1"))
    assert len(encoded) == 200
    encoded.clear()
    history += [Message(role="assistant", content="a"), Message.user("next")]
    request = ProviderRequest(model="", system="s", messages=list(history), session_id="s1")
    _check(provider, request)
    assert encoded[:2] == history[-2:] and all(m in history[-2:] for m in encoded)
    encoded.clear()
    other = ProviderRequest(model="", system="s", messages=history[:3], session_id="s2")
    _check(provider, other)  # another session has its own entry
    assert encoded == history[:3]


def test_the_cache_keeps_a_bounded_number_of_sessions() -> None:
    cache = EncodedMessages(max_sessions=2)
    calls: list[Message] = []
    msgs = [Message.user("a")]
    for session in ("s1", "s2", "s3", "s1"):
        cache.array(session, msgs, lambda m: calls.append(m) or b"x,")
    assert len(calls) == 4  # s1 was dropped for s3, so it is encoded again
    assert len(cache._sessions) == 2


def test_what_orjson_refuses_takes_the_stdlib_path_as_before() -> None:
    provider = _providers()[0]
    huge = [ToolSpec("t", "d", {"type": "object", "maximum": 2**70})]  # beyond orjson's 64 bits
    request = ProviderRequest(model="", system="", messages=[Message.user("hi")], tools=huge, session_id="s1")
    assert provider.encode_body(request) == _as_before(provider.build_body(request))
    broken = ProviderRequest(model="", system="", messages=[Message.user("lone \ud800")], session_id="s1")
    with pytest.raises(HarnessError) as err:
        provider.encode_body(broken)
    assert err.value.kind is ErrorKind.INVALID_REQUEST
    # The failed message left nothing behind: the session's next request still encodes.
    _check(provider, ProviderRequest(model="", system="", messages=[Message.user("hi")], session_id="s1"))


def test_orjson_escapes_strings_as_the_stdlib_did() -> None:
    for start in range(0, 0x110000, 0x800):
        chars = "".join(chr(c) for c in range(start, start + 0x800) if not 0xD800 <= c <= 0xDFFF)
        assert orjson.dumps(chars) == json.dumps(chars, ensure_ascii=False).encode()


def test_anthropic_translates_only_the_new_messages_through_tool_loops(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agentd.providers.anthropic import wire as anthropic_wire

    translated: list[Message] = []
    real = anthropic_wire.content_blocks
    monkeypatch.setattr(
        anthropic_wire, "content_blocks", lambda m, **kw: translated.append(m) or real(m, **kw)
    )
    provider = AnthropicProvider(api_key="k", model="claude-test", thinking_budget=2048)
    thinking = ReasoningBlock(
        provider="anthropic", data={"type": "thinking", "thinking": "t", "signature": "s"}
    )
    history: list[Message] = []
    for i in range(40):
        call = ToolCall(id=f"toolu_{i}", name="bash", arguments='{"command": "ls"}')
        # Every 5th step was written without thinking (thinking off, another provider).
        blocks = [] if i % 5 == 4 else [thinking]
        steps = [
            Message.user(f"task {i}"),
            Message(role="assistant", reasoning_blocks=blocks, tool_calls=[call]),
            Message.tool_result(call, f"output {i}"),
            Message(role="assistant", content=f"done {i}", reasoning_blocks=[thinking]),
        ]
        for message in steps:
            history.append(message)
            request = ProviderRequest(
                model="", system="s", messages=list(history), tools=TOOLS, session_id="s1"
            )
            _check(provider, request)
            # Each message is translated once per thinking mode over the whole session
            # (a mode's cache catches up when it is used again), never per request.
            assert len(translated) <= 2 * len(history)
    assert len(translated) > len(history)  # both modes were used


def test_control_characters_around_the_spliced_conversation_stay_escaped() -> None:
    # The conversation is joined into the body at a raw-NUL placeholder: a NUL (or any
    # control character) in the system prompt, the tools or the messages is escaped text.
    tools = [ToolSpec("t\x00", "d\x00\x01", {"type": "object", "description": "\x00"})]
    messages = [Message.user("a\x00b"), Message(role="assistant", content="\x00"), Message.user("")]
    for provider in _providers():
        for session in ("s1", None):
            request = ProviderRequest(
                model="", system="sys\x00tem", messages=messages, tools=tools, session_id=session
            )
            _check(provider, request)


def _joined(body: dict[str, Any]) -> bytes:
    return b"".join(wire_cache.wire_pieces(lambda: body, dict))


def test_a_placeholder_count_mismatch_joins_the_arrays_apart() -> None:
    array = wire_cache.as_array([b'{"a":1},', b'{"b":2},'])
    assert array.pieces == [b"[", b"", b'{"a":1},', b'{"b":2}', b"]"]
    assert _joined({"x": array, "y": 1}) == b'{"x":[{"a":1},{"b":2}],"y":1}'
    # A body whose other parts held a raw NUL (orjson never writes one): still exact.
    raw = orjson.Fragment(b'"\x00"')
    assert _joined({"x": wire_cache.Spliced([b"[1,", b"2]"]), "z": raw}) == b'{"x":[1,2],"z":"\x00"}'
    assert _joined({"x": wire_cache.as_array([b"", b""])}) == b'{"x":[]}'


def _encode_plain(message: Message) -> bytes:
    # Some messages have no wire items at all (b""), as in the Responses translation.
    return b"" if message.content == "  " else orjson.dumps(message.content) + b","


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_edit, min_size=1, max_size=12),
    st.sampled_from([0, 1, 6, 20, 10**9]),
    st.sampled_from([b"", b'"sys",']),
)
def test_segmented_arrays_equal_the_full_encoding_after_every_edit(
    edits: list[tuple[Any, ...]], segment: int, first: bytes
) -> None:
    # Small segments: sealing, cutting inside a segment and reopening it all happen.
    saved, wire_cache.SEGMENT_BYTES = wire_cache.SEGMENT_BYTES, segment
    try:
        cache = EncodedMessages()
        history: list[Message] = []
        encoded: list[Message] = []
        for edit in edits:
            history = _apply(history, edit)
            encoded.clear()
            array = cache.array("s", list(history), lambda m: encoded.append(m) or _encode_plain(m), first)
            full = wire_cache.as_array([_encode_plain(m) for m in history], first)
            assert b"".join(array.pieces) == b"".join(full.pieces)
            assert json.loads(b"".join(array.pieces)) == json.loads(b"".join(full.pieces))
            assert len(encoded) <= len(history)
            again = cache.array("s", list(history), _encode_plain, first)
            assert b"".join(again.pieces) == b"".join(full.pieces)
    finally:
        wire_cache.SEGMENT_BYTES = saved


def test_a_long_conversation_is_a_few_segments() -> None:
    cache = EncodedMessages()
    history = [Message.user(f"message {i:05d} " + "x" * 50) for i in range(3000)]
    array = cache.array("s", history, _encode_plain)
    assert len(array.pieces) < 20
    history.append(Message.user("next"))
    state = cache._sessions["s"]
    sealed = list(state.segments)
    cache.array("s", history, _encode_plain)
    assert all(a is b for a, b in zip(sealed, state.segments, strict=False))  # reused, not re-joined


def _kept(provider: Any) -> int:
    """How many sessions' conversations the provider keeps encoded."""
    cache = provider._wire if isinstance(provider, AnthropicProvider) else provider._encoded
    return len(cache._sessions)


def test_an_unloaded_session_is_forgotten_and_encoded_afresh_if_it_comes_back() -> None:
    """Issue 32 item 3: the cache kept the last 64 sessions' conversations (their messages
    and bytes) after the server had unloaded them — ~5 MiB after 100 sessions' load."""
    history = [Message.system("s"), Message.user("hi"), Message(role="assistant", content="a")]
    for provider in _providers():
        for sid in ("s1", "s2"):
            request = ProviderRequest(model="", system="s", messages=list(history), session_id=sid)
            provider.encode_body(request)
        assert _kept(provider) == 2
        provider.forget_session("s1")
        provider.forget_session("gone")  # never seen: nothing to do
        assert _kept(provider) == 1
        _check(provider, ProviderRequest(model="", system="s", messages=list(history), session_id="s1"))


def test_the_tools_encoding_is_reused_while_they_are_equal_and_redone_when_they_change() -> None:
    """Issue 32: the tools are encoded once while each request's equal the last; a changed
    description or schema (a new dict, equal or not) is seen, and every body stays the plain
    body's bytes, whatever the provider."""
    schema = {"type": "object", "properties": {"command": {"type": "string"}}}
    same = [ToolSpec("bash", "Run a command.", schema)]
    equal_copy = [ToolSpec("bash", "Run a command.", json.loads(json.dumps(schema)))]
    described = [ToolSpec("bash", "Run one command.", schema)]
    widened = [ToolSpec("bash", "Run a command.", {**schema, "required": ["command"]})]
    two = [*same, ToolSpec("read", "Read.", {"type": "object"})]
    for provider in _providers():
        kept = provider._tools if hasattr(provider, "_tools") else provider._wire._tools
        fragments = []
        for tools in (same, same, equal_copy, described, widened, two, same, []):
            request = ProviderRequest(
                model="", system="s", messages=[Message.user("hi")], tools=list(tools), session_id="s1"
            )
            _check(provider, request)
            fragments.append(kept._encoded)
        assert fragments[0] is fragments[1] is fragments[2]  # equal tools: encoded once
        assert len({id(f) for f in fragments[2:7]}) == 5  # each change: encoded afresh
        assert fragments[7] is fragments[6]  # no tools: the kept encoding is not touched


def test_kept_tools_raise_as_orjson_does_so_the_stdlib_path_takes_the_body() -> None:
    kept = wire_cache.KeptTools()
    with pytest.raises(TypeError):
        kept.fragment([{"bad": object()}])
    assert kept.fragment([{"a": 1}]) is kept.fragment([{"a": 1}])


@pytest.mark.parametrize("which", [0, 1])  # Chat Completions, Responses
def test_the_body_around_the_conversation_is_composed_once_while_the_other_fields_stay(which: int) -> None:
    """Issue 32: per session the bytes around the conversation (model, system prompt, tools,
    options) are kept and reused while a request's other fields equal the last one's; any
    change — a field, the provider's model or reasoning effort — composes them afresh, and every
    body stays the plain body's bytes. Sessions keep their own; an unloaded one's go."""
    schema = {"type": "object", "properties": {"command": {"type": "string"}}}
    provider = _providers()[which]
    composed: list[int] = []
    real = provider._compose
    provider._compose = lambda request, conversation: composed.append(1) or real(request, conversation)
    history: list[Message] = []

    def send(session: str = "s1", **fields: Any) -> None:
        history.append(Message.user(f"u{len(history)}"))
        request = ProviderRequest(
            model=fields.pop("model", ""),
            system=fields.pop("system", "s"),
            messages=list(history),
            tools=fields.pop("tools", [ToolSpec("bash", "Run a command.", schema)]),
            session_id=session,
            **fields,
        )
        composed.clear()
        _check(provider, request)

    send()
    send()
    assert len(composed) == 1  # `_check`'s own build_body only: the body's bytes were kept
    send(tools=[ToolSpec("bash", "Run a command.", json.loads(json.dumps(schema)))])
    assert len(composed) == 1  # equal tools (a copy of the schema): kept
    for change in (
        {"system": "other"},
        {"tools": [ToolSpec("bash", "Run one command.", schema)]},
        {"tools": []},
        {"model": "gpt-other"},
        {"output_schema": {"type": "object"}},
        {"max_output_tokens": 100},
    ):
        send(**change)
        assert len(composed) == 3, change  # composed afresh (+ the kept bytes made again)
        send()
        assert len(composed) == 3, change  # and back
    send(session="s2", system="another session's")
    send()
    assert len(composed) == 1  # s1's bytes are still kept beside s2's
    provider.model = "switched"
    send()
    assert len(composed) == 3
    provider.reasoning_effort = ReasoningEffort.HIGH
    send()
    assert len(composed) == 3
    provider.forget_session("s1")
    assert "s1" not in provider._bodies and "s2" in provider._bodies


@pytest.mark.parametrize("which", [2, 3, 4])  # prompt cache; thinking budget; no cache, adaptive
def test_anthropic_keeps_the_body_around_its_entries_while_the_other_fields_stay(
    which: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentd.providers.anthropic import wire as anthropic_wire

    composed: list[int] = []
    real = anthropic_wire.compose_body
    monkeypatch.setattr(anthropic_wire, "compose_body", lambda *a: composed.append(1) or real(*a))
    provider = _providers()[which]
    history: list[Message] = []

    def send(**fields: Any) -> int:
        history.extend([Message.user(f"u{len(history)}"), Message(role="assistant", content="a")])
        request = ProviderRequest(
            model="",
            system=fields.pop("system", "s"),
            messages=list(history),
            tools=TOOLS,
            session_id="s1",
            **fields,
        )
        composed.clear()
        _check(provider, request)
        return len(composed)

    assert send() == 2  # composed for the body, and for the kept bytes around its entries
    assert send() == 0  # kept (`_check`'s own build_body goes through request.compose_body)
    history.append(Message.system("a system message joins `system`"))
    assert send() == 2
    assert send() == 0
    assert send(system="other") == 2
    assert send(max_output_tokens=50) == 2
    assert send() == 2  # (back to no cap)
    assert send(extended_reasoning=False) == (2 if which in (3, 4) else 0)  # thinking off: another body
    provider.forget_session("s1")
    assert send() == 2

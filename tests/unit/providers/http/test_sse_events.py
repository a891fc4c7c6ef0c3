"""sse.py's EventSplitter (issue 32): the events of a body cut per network read are the ones
the line decoding (LineSplitter + SSEDecoder) gives, whatever the line ends, the fields and
the read boundaries; and parse_event reads an event's bytes as parse_json reads its text."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentd.core.errors import ErrorKind, HarnessError
from agentd.providers.http.sse import EventSplitter, LineSplitter, SSEDecoder, parse_event, parse_json


def by_lines(chunks: list[bytes]) -> list[tuple[str, str]]:
    splitter, decoder = LineSplitter(), SSEDecoder()
    events: list[tuple[str, str]] = []
    for chunk in chunks:
        events += [e for line in splitter.feed(chunk) if (e := decoder.feed(line)) is not None]
    events += [e for line in splitter.close() if (e := decoder.feed(line)) is not None]
    last = decoder.flush()
    return events + ([last] if last is not None else [])


def by_events(chunks: list[bytes]) -> list[tuple[str, str]]:
    splitter = EventSplitter()
    events = [e for chunk in chunks for e in splitter.feed(chunk)] + splitter.close()
    return [(name, data.decode(errors="replace")) for name, data in events]


_line = st.sampled_from(
    [b"data: {\"a\": 1}", b"data:x", b"data", b"data: ", b"event: message_start", b"event:e", b": keep-alive",
     b"id: 7", b"retry: 10", b"", b"data: caf\xc3\xa9 \xe2\x9c\x93", b"data: a:b", b"event:  two", b"nocolon",
     b"data: [DONE]", b"data: \xff\xfe"]
)  # fmt: skip
_end = st.sampled_from([b"\n", b"\r\n", b"\r"])


@st.composite
def bodies(draw: st.DrawFn) -> tuple[bytes, list[int]]:
    lines = draw(st.lists(st.tuples(_line, _end), max_size=30))
    body = b"".join(line + end for line, end in lines) + draw(st.sampled_from([b"", b"data: tail", b"\r"]))
    cuts = sorted(draw(st.lists(st.integers(0, len(body)), max_size=8)))
    return body, cuts


@settings(max_examples=400, deadline=None)
@given(bodies())
def test_the_events_are_the_line_decodings_for_any_body_and_reads(case: tuple[bytes, list[int]]) -> None:
    body, cuts = case
    chunks = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    assert by_events(chunks) == by_lines(chunks) == by_lines([body])


def test_a_model_stream_the_usual_way() -> None:
    body = b'data: {"a":1}\n\ndata: {"a":2}\n\nevent: ping\ndata: {}\n\ndata: [DONE]\n\n'
    splitter = EventSplitter()
    assert splitter.feed(body[:20]) == [("", b'{"a":1}')]
    assert splitter.feed(body[20:]) == [("", b'{"a":2}'), ("ping", b"{}"), ("", b"[DONE]")]
    assert splitter.close() == []


def test_a_crlf_split_across_reads_is_one_line_end() -> None:
    splitter = EventSplitter()
    assert splitter.feed(b"data: x\r\n\r") == []  # the last CR may be half of a CRLF
    assert splitter.feed(b"\ndata: y\r\n\r\n") == [("", b"x"), ("", b"y")]


@pytest.mark.parametrize(
    "data",
    [
        '{"choices": [{"delta": {"content": "h\\u00e9 ✓"}}], "n": 1.5e3, "ok": true, "x": null}',
        '{"nan": NaN}',
        '{"a": 1, "a": 2}',
    ],
)
def test_parse_event_reads_the_bytes_as_parse_json_reads_the_text(data: str) -> None:
    parsed, expected = parse_event(data.encode()), parse_json(data)
    if "nan" in expected:
        assert math.isnan(parsed["nan"])
    else:
        assert parsed == expected


def test_bytes_that_are_not_utf8_parse_as_their_decoded_text() -> None:
    raw = b'{"t": "a\xffb"}'
    assert parse_event(raw) == parse_json(raw.decode(errors="replace")) == {"t": "a\ufffdb"}


@pytest.mark.parametrize("data", [b"{", b"[1, 2]", b"null", b'"text"', b"{'a': 1}"])
def test_anything_but_a_json_object_is_a_broken_stream(data: bytes) -> None:
    with pytest.raises(HarnessError) as info:
        parse_event(data)
    assert info.value.kind is ErrorKind.PROVIDER_UNAVAILABLE
    assert str(info.value) == str(_error_of(data.decode()))


def _error_of(text: str) -> HarnessError:
    try:
        parse_json(text)
    except HarnessError as err:
        return err
    raise AssertionError("parse_json took it")

"""sse.py's LineSplitter: network chunks → SSE lines, whatever the chunk boundaries."""

from __future__ import annotations

import pytest

from agentd.core.errors import ErrorKind, HarnessError
from agentd.providers.http.sse import LineSplitter, SSEDecoder, parse_json

BODY = "event: a\r\ndata: héllo ✓\r\n\r\ndata: one\ndata: two\n\n: keep-alive\rdata: cr\r\rdata: last"


def lines_of(chunks: list[bytes]) -> list[str]:
    splitter = LineSplitter()
    out: list[str] = []
    for chunk in chunks:
        out += splitter.feed(chunk)
    return out + splitter.close()


EXPECTED = [
    "event: a", "data: héllo ✓", "", "data: one", "data: two", "", ": keep-alive", "data: cr", "",
    "data: last",
]  # fmt: skip


def test_whole_body_in_one_chunk() -> None:
    assert lines_of([BODY.encode()]) == EXPECTED


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7])
def test_any_chunking_gives_the_same_lines(size: int) -> None:
    # Every split point occurs: inside CRLF, inside a multi-byte character, mid-line.
    raw = BODY.encode()
    assert lines_of([raw[i : i + size] for i in range(0, len(raw), size)]) == EXPECTED


def test_crlf_split_across_reads_is_one_line_end() -> None:
    splitter = LineSplitter()
    assert splitter.feed(b"data: x\r") == []  # the CR may be half of a CRLF: held back
    assert splitter.feed(b"\n\r\n") == ["data: x", ""]
    assert splitter.close() == []


def test_events_decode_from_split_lines() -> None:
    decoder = SSEDecoder()
    events = [e for line in lines_of([BODY.encode()[:13], BODY.encode()[13:]]) if (e := decoder.feed(line))]
    assert events == [("a", "héllo ✓"), ("", "one\ntwo"), ("", "cr")]
    assert decoder.flush() == ("", "last")


@pytest.mark.parametrize(
    "data",
    [
        '{"choices": [{"delta": {"content": "h\\u00e9 ✓"}}], "n": 1.5e3, "ok": true, "x": null}',
        '{"nan": NaN}',  # not JSON, but what the stdlib parser took before
        '{"a": 1, "a": 2}',
    ],
)
def test_chunks_parse_as_the_stdlib_parses_them(data: str) -> None:
    import json
    import math

    parsed, expected = parse_json(data), json.loads(data)
    if "nan" in expected:
        assert math.isnan(parsed["nan"])
    else:
        assert parsed == expected


@pytest.mark.parametrize("data", ["{", "[1, 2]", "null", '"text"', "{'a': 1}"])
def test_anything_but_a_json_object_is_a_broken_stream(data: str) -> None:
    with pytest.raises(HarnessError) as info:
        parse_json(data)
    assert info.value.kind is ErrorKind.PROVIDER_UNAVAILABLE

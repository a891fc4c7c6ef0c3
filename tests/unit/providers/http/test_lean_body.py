"""lean_body.py's chunked decoding (issue 32: a whole chunk at a time where its bytes are
in): the body is the chunks' data, whatever the read boundaries, with extensions and
trailers; a bad framing is a protocol error; the connection is kept only when read to the end."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentd.providers.http.conn import Connection
from agentd.providers.http.lean_body import LeanBody


class Pool:
    def __init__(self) -> None:
        self.released: list[bool] = []

    def _finished(self, conn: Connection, *, reuse: bool) -> None:
        self.released.append(reuse)


async def read_all(pieces: list[bytes]) -> tuple[list[bytes], Pool, Connection]:
    """The body's reads (`LeanBody.read`), the bytes arriving in `pieces`, one per loop
    turn, then the end of the stream."""
    conn, pool = Connection(("http", "model.test", 80)), Pool()
    body = LeanBody(pool, conn, -1, True, None)
    loop = asyncio.get_running_loop()

    def arrive(i: int) -> None:
        if i < len(pieces):
            conn.data_received(pieces[i])
            loop.call_soon(arrive, i + 1)
        else:
            conn.eof_received()

    loop.call_soon(arrive, 0)
    out: list[bytes] = []
    while (data := await body.read()) is not None:
        out.append(data)
    await body.aclose()
    return out, pool, conn


def chunked(parts: list[bytes], *, ext: bool = False, trailers: bytes = b"") -> bytes:
    framed = b"".join(
        b"%x%s\r\n%s\r\n" % (len(p), b";name=v" if ext and i % 2 else b"", p)
        for i, p in enumerate(parts)
        if p
    )
    return framed + b"0\r\n" + trailers + b"\r\n"


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.binary(min_size=1, max_size=300), max_size=6),
    st.booleans(),
    st.sampled_from([b"", b"x-trailer: t\r\n", b"a: 1\r\nb: 2\r\n"]),
    st.lists(st.integers(0, 2000), max_size=10),
)
async def test_the_body_is_the_chunks_data_for_any_reads(
    parts: list[bytes], ext: bool, trailers: bytes, cuts: list[int]
) -> None:
    raw = chunked(parts, ext=ext, trailers=trailers)
    edges = sorted({min(c, len(raw)) for c in cuts})
    pieces = [raw[a:b] for a, b in zip([0, *edges], [*edges, len(raw)], strict=True) if raw[a:b]]
    out, pool, conn = await read_all(pieces)
    assert b"".join(out) == b"".join(parts)
    assert pool.released == [True] and not conn.buffer


async def test_a_whole_body_in_one_read_is_one_piece_of_data() -> None:
    out, _, _ = await read_all([chunked([b"data: one\n\n", b"data: two\n\n"])])
    assert out == [b"data: one\n\ndata: two\n\n"]


async def test_what_follows_the_body_stays_in_the_buffer_and_the_connection_is_not_kept() -> None:
    out, pool, conn = await read_all([chunked([b"abc"]) + b"HTTP/1.1 200 OK\r\n"])
    assert out == [b"abc"] and conn.buffer == b"HTTP/1.1 200 OK\r\n" and pool.released == [False]


@pytest.mark.parametrize(
    "raw",
    [
        b"zz\r\nabc\r\n0\r\n\r\n",
        b"-3\r\nabc\r\n0\r\n\r\n",
        b"3\r\nabcX\r\n0\r\n\r\n",
        b"3;e\r\nabc\r\nq;e\r\n",
    ],
)
async def test_a_bad_framing_is_a_protocol_error(raw: bytes) -> None:
    with pytest.raises(httpx.RemoteProtocolError):
        await read_all([raw])


async def test_a_size_line_too_long_is_a_protocol_error() -> None:
    with pytest.raises(httpx.RemoteProtocolError, match="too long"):
        await read_all([b"1" * 5000])


async def test_a_body_cut_before_its_end_is_a_protocol_error() -> None:
    with pytest.raises(httpx.RemoteProtocolError):
        await read_all([b"5\r\nab"])

"""A body in pieces goes out as the joined body would, in few writes: small neighbours
joined, large pieces as they are (the very objects, not copies)."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from agentd.providers.http.body import BATCH, BodyPieces, batches

_piece = st.one_of(st.binary(max_size=40), st.integers(0, 3 * BATCH).map(lambda n: bytes([65 + n % 26]) * n))


@given(st.binary(min_size=1, max_size=300), st.lists(_piece, max_size=12))
def test_batches_are_the_body_in_order(head: bytes, pieces: list[bytes]) -> None:
    out = list(batches(head, pieces))
    assert b"".join(out) == head + b"".join(pieces)
    large = [p for p in pieces if len(p) > BATCH]
    for piece in large:  # written as they are
        assert any(chunk is piece for chunk in out)
    assert all(len(chunk) <= BATCH or any(chunk is p for p in large) for chunk in out)
    for before, after in itertools.pairwise(out):  # no two writes that could be one
        assert len(before) + len(after) > BATCH


def test_other_readers_iterate_the_pieces() -> None:
    body = BodyPieces([b"ab", b"", b"c"])
    assert body.length == 3 and list(body) == [b"ab", b"", b"c"]

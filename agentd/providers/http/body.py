"""A request body in pieces (issue 14, item 4): the providers' encoded conversation is
kept in segments (`wire_cache`), and the lean transport writes them as they are.

Joining a long conversation's body into one bytes object cost a fresh mmapped block, page
faults included, on every model call (agentd/infra/rss_trim.py fixes glibc's mmap threshold at
128 KiB); the socket copies the bytes anyway.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx

BATCH = 16 * 1024  # neighbouring pieces go out joined up to this size (fewer writes)


class BodyPieces(httpx.AsyncByteStream, httpx.SyncByteStream):
    """A request body given in pieces. `http_lean` writes them (`batches`); other readers
    (another transport, `request.read()`) iterate them."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = pieces
        self.length = sum(map(len, pieces))

    def __iter__(self) -> Iterator[bytes]:
        yield from self.pieces

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self.pieces:
            yield piece


def batches(head: bytes, pieces: list[bytes]) -> Iterator[bytes]:
    """The head and the pieces, in order, as writes: small neighbours joined (up to BATCH),
    large pieces as they are (not copied)."""
    batch, size = [head], len(head)
    for piece in pieces:
        if batch and size + len(piece) > BATCH:
            yield batch[0] if len(batch) == 1 else b"".join(batch)
            batch, size = [], 0
        batch.append(piece)
        size += len(piece)
    if batch:
        yield batch[0] if len(batch) == 1 else b"".join(batch)

"""What a binary file is, for read_file's description of it (size and MIME type) in place
of its bytes."""

from __future__ import annotations

import mimetypes
import threading
from collections.abc import Callable

BINARY_SNIFF_BYTES = 8192
READ_COUNT_MAX_BYTES = 1024 * 1024 * 1024  # past this, read_file gives a size, not a line count
_COUNT_CHUNK = 1024 * 1024

# Leading bytes of common binary formats; a file's name alone can lie or say nothing.
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF8", "image/gif"),
    (b"%PDF-", "application/pdf"),
    (b"PK\x03\x04", "application/zip"),
    (b"\x1f\x8b", "application/gzip"),
    (b"BZh", "application/x-bzip2"),
    (b"\xfd7zXZ\x00", "application/x-xz"),
    (b"\x7fELF", "application/x-executable"),
    (b"SQLite format 3\x00", "application/vnd.sqlite3"),
    (b"\x00asm", "application/wasm"),
)


def is_binary(head: bytes) -> bool:
    return b"\0" in head[:BINARY_SNIFF_BYTES]


def mime_type(name: str, head: bytes) -> str:
    for magic, mime in _MAGIC:
        if head.startswith(magic):
            return mime
    guessed, _ = mimetypes.guess_type(name, strict=False)
    return guessed or "application/octet-stream"


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{size} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def describe_binary(disp: str, name: str, head: bytes, size: int) -> str:
    return (
        f"{disp} is a binary file ({mime_type(name, head)}, {human_size(size)}); read_file shows text "
        "only, so its bytes are not shown. Inspect it with a tool for its type in bash if needed "
        "(e.g. `file`, `xxd | head`, `unzip -l`)."
    )


def count_lines(read_chunk: Callable[[int, int], bytes], size: int, stop: threading.Event) -> int | None:
    """Lines in a file of `size` bytes, by counting newlines chunk by chunk (bounded memory);
    None for a file too big to be worth the time, or once the call is gone.
    `read_chunk(offset, n)` reads bytes."""
    if size > READ_COUNT_MAX_BYTES:
        return None
    count = 0
    offset = 0
    last = b""
    while offset < size:
        if stop.is_set():
            return None
        chunk = read_chunk(offset, _COUNT_CHUNK)
        if not chunk:
            break
        count += chunk.count(b"\n")
        offset += len(chunk)
        last = chunk[-1:]
    return count + (1 if last and last != b"\n" else 0)

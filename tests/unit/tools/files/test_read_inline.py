"""read_file's small read on the loop (issue 32): a regular file of at most
`INLINE_READ_MAX` bytes is read in the caller's step, without the hop to the tool pool; a
larger one still goes to the pool (its deadline and stop). Both give the same result."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from agentd.tools import ToolContext, ToolError, offload
from agentd.tools.files import tools
from agentd.tools.files.tools import ReadFile

FILES: dict[str, bytes] = {
    "small.md": b"# Title\n\nSome text.\n",
    "empty.txt": b"",
    "no-newline.txt": b"one\ntwo",
    "crlf.txt": b"a\r\nb\r\n",
    "long-line.txt": b"x" * 5000 + b"\nshort\n",
    "binary.bin": b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4,
    "bad-utf8.txt": b"ok\n\xff\xfe\n",
    "at-the-bound.txt": b"y\n" * (tools.INLINE_READ_MAX // 2),
    "past-the-bound.txt": b"z\n" * (tools.INLINE_READ_MAX // 2 + 1),
    "many-lines.txt": b"".join(b"line %d\n" % i for i in range(3000))[: tools.INLINE_READ_MAX],
}
ARGS: list[dict[str, Any]] = [
    {},
    {"offset": 2},
    {"offset": 2, "limit": 1},
    {"offset": 500},
    {"limit": 3},
]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    for name, data in FILES.items():
        (root / name).write_bytes(data)
    (root / "sub").mkdir()
    return root


async def _read(ws: Path, args: dict[str, Any]) -> tuple[str, Any, Any] | tuple[str, str]:
    try:
        result = await ReadFile().run(args, ToolContext(cwd=ws, session_id="s"))
    except ToolError as exc:
        return "error", str(exc)
    return result.output, result.raw_output, result.locations


@pytest.mark.parametrize("name", [*FILES, "sub", "missing.txt"])
@pytest.mark.parametrize("extra", ARGS)
async def test_the_loop_and_the_pool_read_alike(
    ws: Path, name: str, extra: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    args = {"path": name, **extra}
    monkeypatch.setattr(tools, "INLINE_READ_MAX", 0)
    on_pool = await _read(ws, args)
    monkeypatch.setattr(tools, "INLINE_READ_MAX", 16 * 1024)
    assert await _read(ws, args) == on_pool


async def test_a_small_file_is_read_without_the_pool_and_a_large_one_with_it(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hops: list[str] = []
    run_blocking = offload.run_blocking

    async def counted(fn: Any, *, what: str, **kw: Any) -> Any:
        hops.append(what)
        return await run_blocking(fn, what=what, **kw)

    monkeypatch.setattr(tools, "run_blocking", counted)
    ctx = ToolContext(cwd=ws, session_id="s")
    await ReadFile().run({"path": "at-the-bound.txt"}, ctx)
    assert hops == []
    await ReadFile().run({"path": "past-the-bound.txt"}, ctx)
    assert hops == ["read past-the-bound.txt"]
    monkeypatch.setattr(tools, "INLINE_READ_MAX", 0)
    await ReadFile().run({"path": "small.md"}, ctx)
    assert hops == ["read past-the-bound.txt", "read small.md"]


async def test_a_fifo_is_refused_before_any_read_on_the_loop(ws: Path) -> None:
    os.mkfifo(ws / "pipe")  # opened non-blocking and refused by its type: nothing waits for a writer
    with pytest.raises(ToolError, match="named pipe"):
        await ReadFile().run({"path": "pipe"}, ToolContext(cwd=ws, session_id="s"))

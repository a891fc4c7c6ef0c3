"""The wire bytes do not change unnoticed (issue 32, item 6): a real `agentd serve` with the
OpenAI provider against FakeOpenAI runs a fixed session — a trivial turn, a one-tool turn
(read_file), then a second client attaching from the start — and every WebSocket frame
each client received, byte for byte as sent, is compared with the golden file recorded
once (golden/session_wire.txt). Only what differs by nature between runs is normalised:
generated ids (numbered by first appearance, so which frames share an id still counts),
the temporary paths, and the clock (timestamps, durations).

A deliberate wire change re-records the file: AGENTD_GOLDEN_UPDATE=1 pytest this_file.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path
from typing import Any

import websockets

from agentd.protocol.agentd import AGENTD_CLIENT
from tests.support.fakes.openai_server import Completion, FakeOpenAI, ToolCallScript
from tests.support.proc import agentd_serve

GOLDEN = Path(__file__).parent / "golden" / "session_wire.txt"
README = "# Golden\n\nA small file for read_file.\n"

_ID = re.compile(r"\b(sess|turn|prompt|msg|user|call|tool|perm|req|sub|task|q)_[0-9a-f]{12,}\b")
_TIME = re.compile(r'"(\w*(?:At|Ms|_at|_ms|Seconds|time|Time))":\s*(?:"[^"]*"|-?[\d.eE+-]+)')
_ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?")


def normalise(frames: list[str], paths: dict[str, str]) -> list[str]:
    """The frames with ids numbered in order of appearance, paths and times replaced."""
    seen: dict[str, str] = {}

    def number(m: re.Match[str]) -> str:
        return seen.setdefault(m[0], f"{m[1]}_<{len(seen)}>")

    out = []
    for text in frames:
        for path, name in paths.items():
            text = text.replace(json.dumps(path)[1:-1], name).replace(path, name)
        text = _ID.sub(number, text)
        text = _TIME.sub(lambda m: f'"{m[1]}":"<time>"', text)
        out.append(_ISO.sub("<time>", text))
    return out


async def session(
    ws: websockets.ClientConnection, frames: list[str], method: str, params: dict[str, Any], rid: int
) -> dict[str, Any]:
    """One request; every frame until its response goes to `frames` as received."""
    await ws.send(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}))
    while True:
        async with asyncio.timeout(60):  # bounded: a server that never answers fails the test
            text = str(await ws.recv())
        frames.append(text)
        msg = json.loads(text)
        if msg.get("id") == rid and "method" not in msg:
            assert "error" not in msg, text
            return dict(msg["result"])


async def test_a_fixed_session_sends_the_golden_frames_byte_for_byte(tmp_path: Path) -> None:
    ws_dir = tmp_path / "ws"
    ws_dir.mkdir()
    (ws_dir / "README.md").write_text(README)
    call = ToolCallScript(id="call_golden1", name="read_file", arguments='{"path": "README.md"}')
    script = [
        Completion.from_text("Hello there, all is well.", chunk_size=6),
        Completion(tool_calls=[call]),
        Completion.from_text("It is a small file.", chunk_size=5),
    ]
    async with FakeOpenAI(script) as fake:
        settings = {"provider": "openai", "model": "golden-model", "openai_base_url": fake.base_url,
                    "openai_api_key": "sk-golden", "permission_mode": "bypass"}  # fmt: skip
        async with agentd_serve(tmp_path / "home", **settings) as server:
            url = server.base_url.replace("http://", "ws://") + "/acp"
            hello = {"protocolVersion": 1, "clientCapabilities": {}, "_meta": AGENTD_CLIENT}
            frames: list[str] = []
            async with websockets.connect(url, max_size=None) as ws:
                await session(ws, frames, "initialize", hello, 1)
                new = {"cwd": str(ws_dir), "mcpServers": []}
                sid = (await session(ws, frames, "session/new", new, 2))["sessionId"]
                for rid, text in ((3, "hi"), (4, "What does README.md say?")):
                    prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}
                    await session(ws, frames, "session/prompt", prompt, rid)
            frames.append("-- a second client attaches from the start --")
            async with websockets.connect(url, max_size=None) as ws:
                await session(ws, frames, "initialize", hello, 1)
                await session(ws, frames, "_agentd/session/attach", {"sessionId": sid, "afterSeq": 0}, 2)
    got = "\n".join(normalise(frames, {str(ws_dir): "<ws>", str(tmp_path): "<tmp>"})) + "\n"
    if os.environ.get("AGENTD_GOLDEN_UPDATE") == "1":
        GOLDEN.write_text(got)
    assert got == GOLDEN.read_text()

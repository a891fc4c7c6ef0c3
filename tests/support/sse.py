"""Reading a Server-Sent-Events response frame by frame."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx


class SseStream:
    """Parses an SSE response into frames: {"id", "event", "data", "comments"}."""

    def __init__(self, resp: httpx.Response) -> None:
        self.resp = resp
        self.frames: list[dict[str, Any]] = []
        self._lines = resp.aiter_lines()

    async def next(self, within: float = 10) -> dict[str, Any]:
        async def read() -> dict[str, Any]:
            frame: dict[str, Any] = {"comments": []}
            async for line in self._lines:
                if line == "":
                    if len(frame) > 1 or frame["comments"]:
                        return frame
                    continue
                if line.startswith(":"):
                    frame["comments"].append(line[1:].strip())
                    continue
                field, _, value = line.partition(":")
                value = value.removeprefix(" ")
                if field == "data":
                    frame["data"] = json.loads(value)
                else:
                    frame[field] = value
            raise EOFError("stream ended")

        frame = await asyncio.wait_for(read(), within)
        self.frames.append(frame)
        return frame

    async def until(self, predicate: Callable[[dict[str, Any]], bool], within: float = 20) -> dict[str, Any]:
        async with asyncio.timeout(within):
            while True:
                frame = await self.next(within)
                if predicate(frame):
                    return frame


@asynccontextmanager
async def sse(
    base_url: str,
    session_id: str,
    *,
    params: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> AsyncIterator[SseStream]:
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        async with http.stream(
            "GET", f"/sessions/{session_id}/events", params=params, headers=headers
        ) as resp:
            assert resp.status_code == 200, resp.status_code
            assert resp.headers["content-type"].startswith("text/event-stream")
            yield SseStream(resp)


def is_turn_ended(frame: dict[str, Any]) -> bool:
    return frame.get("event") == "_agentd/event" and frame["data"]["kind"] == "turn_ended"


def frame_seq(frame: dict[str, Any]) -> int | None:
    data = frame.get("data")
    if not isinstance(data, dict):
        return None
    return ((data.get("_meta") or {}).get("agentd") or {}).get("seq")


def durable_ids(frames: list[dict[str, Any]]) -> list[int]:
    out: list[int] = []
    for f in frames:
        if "id" in f and (not out or out[-1] != int(f["id"])):
            out.append(int(f["id"]))
    return out

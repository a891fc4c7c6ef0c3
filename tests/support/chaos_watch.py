"""What the chaos driver's clients see (tests/support/chaos.py): a watcher attached to one
session through one replica, recording every durable frame with its arrival time, and the
frame lists each stored event may arrive as (live, or replayed on attach)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import random
import time
from typing import Any, Protocol

import orjson
import websockets

from agentd.core.events import Event, EventKind
from agentd.protocol.acp import ClientCapabilities
from agentd.protocol.agentd import AGENTD_CLIENT, ATTACH
from agentd.transport.render import attach_frames, for_client, live_frames
from tests.support.chaos_check import ClientRecord, Notice, Received, Stored
from tests.support.proc import AgentdProcess

RESYNC = "_agentd/resync_required"


class Replicas(Protocol):
    servers: dict[str, AgentdProcess]

    def live(self) -> list[str]: ...


class Watcher:
    """A client attached to one session through one replica (another one while that is
    down): every durable frame recorded with its arrival time; told to resync or cut off,
    it reconnects and re-attaches after the last seq it got."""

    def __init__(self, cluster: Replicas, sid: str, home: str) -> None:
        self.cluster, self.home = cluster, home
        self.record = ClientRecord(f"{sid}@{home}", sid)

    def target(self) -> str | None:
        live = self.cluster.live()
        return self.home if self.home in live else (random.choice(live) if live else None)

    async def run(self) -> None:
        while True:
            rid = self.target()
            if rid is None:
                await asyncio.sleep(0.2)
                continue
            with contextlib.suppress(OSError, websockets.WebSocketException, TimeoutError):
                await self.follow(self.cluster.servers[rid].base_url)
            self.record.notices.append(Notice(time.monotonic(), "disconnected"))
            await asyncio.sleep(0.2)  # reconnect backoff

    async def follow(self, base: str) -> None:
        url = base.replace("http://", "ws://") + "/acp"
        async with asyncio.timeout(5):
            ws = await websockets.connect(url, max_size=None, open_timeout=5)
        async with ws:
            ids = itertools.count(1)

            async def attach() -> None:
                params = {"sessionId": self.record.session_id, "afterSeq": self.record.last_seq}
                await ws.send(
                    json.dumps({"jsonrpc": "2.0", "id": next(ids), "method": ATTACH, "params": params})
                )

            init = {"protocolVersion": 1, "clientCapabilities": {}, "_meta": AGENTD_CLIENT}
            await ws.send(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}))
            await attach()
            async for text in ws:
                now = time.monotonic()
                msg = json.loads(text)
                if "id" in msg and "method" not in msg:
                    if "error" in msg:  # the attach refused (owner busy, restarting): again
                        await asyncio.sleep(0.2)
                        await attach()
                    continue
                params = msg.get("params") or {}
                if msg.get("method") == RESYNC:
                    self.record.notices.append(Notice(now, str(params.get("reason"))))
                    await attach()
                    continue
                meta = (params.get("_meta") or {}).get("agentd") or {}
                if params.get("sessionId") == self.record.session_id and "seq" in meta:
                    if not meta.get("transient"):
                        self.record.frames.append(Received(now, int(meta["seq"]), msg))


def expected_forms(sid: str, log: list[Stored]) -> dict[int, list[list[dict[str, Any]]]]:
    """seq → the frame lists a watcher (no extra capabilities) may get for it: the live
    rendering or the attach replay's, as JSON."""
    caps = ClientCapabilities()
    out = {}
    for e in log:
        try:
            event = Event.stored(sid, EventKind(e.kind), e.payload, e.seq)
        except ValueError:
            out[e.seq] = []
            continue
        forms = []
        for frames in (live_frames(event, e.seq), attach_frames(event)):
            shown = for_client(frames, event, caps.supports_update, e.seq)
            as_json = [
                orjson.loads(orjson.dumps({"jsonrpc": "2.0", "method": m, "params": p})) for m, p in shown
            ]
            if as_json not in forms:
                forms.append(as_json)
        out[e.seq] = forms
    return out

"""The bare relay of bench/floor.py: a process doing exactly a recorded agentd turn's I/O.

    python bench/floor_relay.py SCRIPT PORT DB_URL WORKSPACE   (bench/floor.py starts it)

SCRIPT is a pickle written by bench/floor.py while a real `agentd serve` ran a turn: for each
kind of turn ("trivial", "tool") the timeline of what agentd did — its group commits (the
SQLite statements and rows, or the Postgres statement and parameters), the WebSocket frames
it sent, and the raw HTTP/1.1 requests it wrote to the model — in the order it did them.
On `session/prompt` the relay replays that timeline and nothing else:

- a commit: the same statements with the same rows (each turn's seq/idx moved past the last
  turn's), on a writer thread of its own (SQLite, WAL, synchronous=NORMAL, one connection,
  BEGIN … executemany … COMMIT) or one asyncpg connection in autocommit (Postgres: agentd's
  own single-statement commit, with its NOTIFY and fencing triggers);
- a frame: the recorded JSON-RPC frame as a dict, its seq and request id set, encoded with
  orjson and sent (agent_message_chunk frames are built from the model's stream instead);
- a model call: the recorded request bytes on one kept-alive HTTP/1.1 connection to the same
  fake model, the chunked SSE answer decoded, each `data:` event parsed with orjson, each
  text delta sent as a chunk frame; a tool call read (the tool's file read as agentd does).

Same WebSocket library (`websockets`, its asyncio server, no compression, as agentd's uvicorn
runs `websockets-sansio`), same loop (uvloop), same bytes, same durability.
"""

from __future__ import annotations

import asyncio
import pickle
import queue
import sqlite3
import sys
import threading
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
import uvloop
from websockets.asyncio.server import ServerConnection, serve

SEQ_STEP = 1000  # each turn's rows move this far past the last turn's (unique seq/idx)


class Writer:
    """One thread running the calls handed to it; each result back with call_soon_threadsafe
    (agentd's WriterThread: the cheapest hop there is)."""

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        threading.Thread(target=self._serve, name="floor-writer", daemon=True).start()

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        self._calls.put((fn, args, done, loop))
        return await done

    def _serve(self) -> None:
        while True:
            fn, args, done, loop = self._calls.get()
            try:
                out: tuple[Any, BaseException | None] = (fn(*args), None)
            except BaseException as exc:
                out = (None, exc)
            loop.call_soon_threadsafe(_settle, done, *out)


def _settle(done: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    if exc is not None:
        done.set_exception(exc)
    else:
        done.set_result(result)


class SqliteStore:
    def __init__(self, path: str) -> None:
        self.writer = Writer()
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "busy_timeout=5000"):
            self.conn.execute(f"PRAGMA {pragma}")

    async def commit(self, statements: list[tuple[str, list[tuple[Any, ...]]]], shift: int) -> None:
        await self.writer.run(self._commit, statements, shift)

    def _commit(self, statements: list[tuple[str, list[tuple[Any, ...]]]], shift: int) -> None:
        at = datetime.now(UTC).replace(tzinfo=None).isoformat(" ")  # as SQLAlchemy stores it
        cur = self.conn.cursor()
        cur.execute("BEGIN")
        for sql, rows in statements:
            if sql.startswith("INSERT INTO events"):
                rows = [(s, q + shift, k, p, at) for s, q, k, p, _ in rows]
            elif sql.startswith("INSERT INTO messages"):
                rows = [(s, i + shift, d) for s, i, d in rows]
            else:  # UPDATE sessions … updated_at = ? WHERE id = ?
                rows = [(*r[:-2], at, r[-1]) for r in rows]
            cur.executemany(sql, rows)
        self.conn.commit()


class PgStore:
    def __init__(self, conn: Any) -> None:
        self.conn = conn

    async def commit(self, step: tuple[str, tuple[Any, ...]], shift: int) -> None:
        sql, params = step
        p = list(params)
        p[0] = datetime.now(UTC)
        if isinstance(p[1], str):  # rows as json parameters: events $2, messages $4 (issue 32)
            p[1], p[3] = (_shifted(p[i], shift) for i in (1, 3))
        else:  # one array per column (a tree from before)
            p[2] = [q + shift for q in p[2]]  # events' seq
            p[6] = [i + shift for i in p[6]]  # messages' idx
        await self.conn.execute(sql, *p)


def _shifted(rows: str, shift: int) -> str:
    """A json parameter's rows `[session, seq or idx, …]` with their seq/idx moved by `shift`
    (loaded and dumped as agentd builds one: a C call each way)."""
    parsed = orjson.loads(rows)
    for row in parsed:
        row[1] += shift
    return orjson.dumps(parsed).decode()


class Model(asyncio.Protocol):
    """One kept-alive HTTP/1.1 connection to the fake model: a raw request out, a chunked
    SSE answer in, each `data:` event handed to `on_event` as it is decoded."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is no asyncio.Transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ConnectionError("the model closed the connection"))

    async def _more(self) -> None:
        self.waiter = asyncio.get_running_loop().create_future()
        await self.waiter

    async def exchange(self, request: bytes) -> AsyncIterator[dict[str, Any]]:
        assert self.transport is not None
        self.transport.write(request)
        while (end := self.buf.find(b"\r\n\r\n")) < 0:
            await self._more()
        head = bytes(self.buf[:end]).lower()
        del self.buf[: end + 4]
        if b"transfer-encoding: chunked" not in head:
            raise SystemExit(f"the model's answer is not chunked: {head!r}")
        sse = bytearray()
        while True:
            while (eol := self.buf.find(b"\r\n")) < 0:
                await self._more()
            size = int(bytes(self.buf[:eol]).split(b";")[0], 16)
            while len(self.buf) < eol + 2 + size + 2:
                await self._more()
            sse += self.buf[eol + 2 : eol + 2 + size]
            del self.buf[: eol + 2 + size + 2]
            if size == 0:
                return
            while (cut := sse.find(b"\n\n")) >= 0:
                event = bytes(sse[:cut])
                del sse[: cut + 2]
                for line in event.split(b"\n"):
                    if line.startswith(b"data: ") and line != b"data: [DONE]":
                        yield orjson.loads(line[6:])


class Relay:
    def __init__(self, script: dict[str, Any], store: Any, model: Model, workspace: Path) -> None:
        self.script, self.store, self.model, self.workspace = script, store, model, workspace
        self.turns = 0

    async def handle(self, ws: ServerConnection) -> None:
        async for text in ws:
            msg = orjson.loads(text)
            method, rid = msg.get("method"), msg.get("id")
            if method == "session/prompt":
                blocks = msg["params"]["prompt"]
                tool = any(self.script["tool_mark"] in b.get("text", "") for b in blocks)
                try:
                    await self.turn(ws, self.script["tool" if tool else "trivial"], rid)
                except Exception as exc:  # the harness stops at once instead of waiting
                    error = {"code": -32603, "message": f"relay: {exc!r}"}
                    await ws.send(orjson.dumps({"jsonrpc": "2.0", "id": rid, "error": error}).decode())
                continue
            result: dict[str, Any] = {}
            if method == "session/new":
                result = {"sessionId": self.script["session_ids"][0]}
            elif method == "initialize":
                result = {"protocolVersion": 1, "agentCapabilities": {}}
            await ws.send(orjson.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).decode())

    async def turn(self, ws: ServerConnection, timeline: list[tuple[str, Any]], rid: Any) -> None:
        self.turns += 1
        shift = self.turns * SEQ_STEP
        chunk_template = next((f for kind, f in timeline if kind == "frame" and _is_chunk(f)), None)

        for kind, step in timeline:
            if kind == "commit":
                await self.store.commit(step, shift)
            elif kind == "frame" and not _is_chunk(step):
                if "id" in step and "method" not in step:
                    step = {**step, "id": rid}
                await ws.send(_encode(step, shift))
            elif kind == "http":
                tool = False
                async for event in self.model.exchange(step):
                    delta = event["choices"][0]["delta"] if event.get("choices") else {}
                    if delta.get("content") and chunk_template is not None:
                        # in place: the template is ours, and encoded at once
                        chunk_template["params"]["update"]["content"]["text"] = delta["content"]
                        await ws.send(_encode(chunk_template, shift))
                    tool = tool or bool(delta.get("tool_calls"))
                if tool:  # the tool agentd runs (read_file): the same file read
                    (self.workspace / "README.md").read_bytes()


def _is_chunk(frame: dict[str, Any]) -> bool:
    update = frame.get("params", {}).get("update", {})
    return isinstance(update, dict) and update.get("sessionUpdate") == "agent_message_chunk"


def _encode(frame: dict[str, Any], shift: int) -> str:
    meta = frame.get("params", {}).get("_meta", {}).get("agentd")
    if isinstance(meta, dict) and "seq" in meta:
        meta["seq"] = meta["seq"] % SEQ_STEP + shift  # in place: the template is ours
    return orjson.dumps(frame).decode()


async def main(script_path: str, port: int, db_url: str, workspace: str, model_url: str) -> None:
    script = pickle.loads(Path(script_path).read_bytes())  # noqa: ASYNC240 - before serving
    store: Any
    if db_url.startswith("postgresql"):
        import asyncpg

        store = PgStore(await asyncpg.connect(db_url))
    else:
        store = SqliteStore(db_url)
    parts = urlsplit(model_url)
    loop = asyncio.get_running_loop()
    _, model = await loop.create_connection(Model, parts.hostname, parts.port)
    relay = Relay(script, store, model, Path(workspace))
    async with serve(relay.handle, "127.0.0.1", port, compression=None, max_size=None):
        print("ready", flush=True)
        await loop.run_in_executor(None, sys.stdin.read)  # until the harness closes stdin


if __name__ == "__main__":
    a = sys.argv[1:]
    uvloop.run(main(a[0], int(a[1]), a[2], a[3], a[4]))

"""A Postgres proxy on a free loopback port that forwards every byte unchanged and reads the
protocol on the way (tests/e2e/store/test_pg_statements.py, bench/pg_wire.py).

Per client connection: its database and `application_name` (from the start-up message), the
frontend messages by type (Query, Parse, Bind, Execute, Sync …) with the text of every
statement executed (a Query's, or the Parse'd text an Execute runs), the backend messages by
type with the channel of every notification received, and the chunks read each way (≈ the
client's socket writes and reads). `snapshot()` copies the counters; `per_turn` lines up two
snapshots. A client is pointed at it by replacing the port of its database URL (`url_of`).
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections import Counter
from dataclasses import dataclass, field
from types import TracebackType
from typing import Self

SSL_REQUEST, GSS_REQUEST, CANCEL_REQUEST = 80877103, 80877104, 80877102
COMMIT_MARK = "INSERT INTO events"  # the group commit's statement holds it


@dataclass
class PgConn:
    """One proxied connection's counters."""

    n: int
    database: str = ""
    application: str = ""
    front: Counter[str] = field(default_factory=Counter)  # frontend message types
    back: Counter[str] = field(default_factory=Counter)  # backend message types
    statements: Counter[str] = field(default_factory=Counter)  # executed statements' texts
    notified: Counter[str] = field(default_factory=Counter)  # channels of notifications received
    writes: int = 0  # chunks read from the client
    reads: int = 0  # chunks read from the server
    prepared: dict[str, str] = field(default_factory=dict)
    portal: str = ""

    def snapshot(self) -> PgConn:
        return PgConn(
            self.n, self.database, self.application, Counter(self.front), Counter(self.back),
            Counter(self.statements), Counter(self.notified), self.writes, self.reads,
        )  # fmt: skip

    def since(self, before: PgConn | None) -> PgConn:
        """What happened on it after `before` (a snapshot of it; None: from its start)."""
        b = before or PgConn(self.n)
        return PgConn(
            self.n, self.database, self.application, self.front - b.front, self.back - b.back,
            self.statements - b.statements, self.notified - b.notified, self.writes - b.writes,
            self.reads - b.reads,
        )  # fmt: skip

    def role(self) -> str:
        """What it is for, by what it sends: the listener, the group commit, anything else."""
        if self.application == "agentd-listen" or any("LISTEN" in s for s in self.statements):
            return "listen"
        if any(COMMIT_MARK in s for s in self.statements):
            return "commit"
        return self.application or "other"


def short(sql: str, width: int = 90) -> str:
    one = " ".join(sql.split())
    return one if len(one) <= width else one[: width - 3] + "..."


def _cstr(body: bytes, at: int) -> tuple[str, int]:
    end = body.index(b"\0", at)
    return body[at:end].decode(errors="replace"), end + 1


class _Frontend:
    """Client → server: the untyped start-up messages, then typed ones."""

    def __init__(self, conn: PgConn) -> None:
        self.conn, self.buf, self.started = conn, bytearray(), False

    def feed(self, data: bytes) -> None:
        self.buf += data
        while self._one():
            pass

    def _one(self) -> bool:
        if not self.started:
            if len(self.buf) < 8 or len(self.buf) < (size := struct.unpack("!I", self.buf[:4])[0]):
                return False
            body, self.buf = bytes(self.buf[4:size]), self.buf[size:]
            code = struct.unpack("!I", body[:4])[0]
            if code in (SSL_REQUEST, GSS_REQUEST, CANCEL_REQUEST):
                self.conn.front[f"startup {code}"] += 1
                return True
            parts = body[4:].split(b"\0")
            pairs = dict(zip(parts[::2], parts[1::2], strict=False))
            self.conn.database = pairs.get(b"database", b"").decode()
            self.conn.application = pairs.get(b"application_name", b"").decode()
            self.started = True
            return True
        if len(self.buf) < 5 or len(self.buf) < (size := struct.unpack("!I", self.buf[1:5])[0]) + 1:
            return False
        kind, body = chr(self.buf[0]), bytes(self.buf[5 : size + 1])
        del self.buf[: size + 1]
        self.conn.front[kind] += 1
        if kind == "Q":
            self.conn.statements[_cstr(body, 0)[0]] += 1
        elif kind == "P":
            name, at = _cstr(body, 0)
            self.conn.prepared[name] = _cstr(body, at)[0]
        elif kind == "B":
            _, at = _cstr(body, 0)
            self.conn.portal = self.conn.prepared.get(_cstr(body, at)[0], "?")
        elif kind == "E":
            self.conn.statements[self.conn.portal] += 1
        return True


class _Backend:
    """Server → client: a single byte answers an SSL/GSS request, then typed messages."""

    def __init__(self, conn: PgConn) -> None:
        self.conn, self.buf, self.answered = conn, bytearray(), 0

    def feed(self, data: bytes) -> None:
        self.buf += data
        while self._one():
            pass

    def _one(self) -> bool:
        asked = self.conn.front[f"startup {SSL_REQUEST}"] + self.conn.front[f"startup {GSS_REQUEST}"]
        if self.answered < asked and self.buf:
            self.answered += 1
            del self.buf[:1]
            return True
        if len(self.buf) < 5 or len(self.buf) < (size := struct.unpack("!I", self.buf[1:5])[0]) + 1:
            return False
        kind, body = chr(self.buf[0]), bytes(self.buf[5 : size + 1])
        del self.buf[: size + 1]
        self.conn.back[kind] += 1
        if kind == "A":  # NotificationResponse: pid, channel, payload
            self.conn.notified[_cstr(body, 4)[0]] += 1
        return True


class PgWire:
    """The proxy (an async context manager), forwarding to `host:port`."""

    def __init__(self, host: str = "127.0.0.1", port: int = 5432) -> None:
        self.upstream = (host, port)
        self.port = 0
        self.conns: list[PgConn] = []
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: list[asyncio.StreamWriter] = []

    def url_of(self, url: str) -> str:
        """`url` (a database URL on the upstream's port) through the proxy."""
        return url.replace(f":{self.upstream[1]}/", f":{self.port}/")

    def snapshot(self) -> list[PgConn]:
        return [c.snapshot() for c in self.conns]

    def since(self, before: list[PgConn], database: str | None = None) -> list[PgConn]:
        """Every connection's counters after `before` (a `snapshot()`), of `database` only if given."""
        old = {c.n: c for c in before}
        return [c.since(old.get(c.n)) for c in self.conns if database is None or c.database == database]

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:  # each pump then ends at its read's end
            writer.transport.abort()
        if self._tasks:
            await asyncio.wait(set(self._tasks))

    async def _serve(self, cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        conn = PgConn(len(self.conns))
        self.conns.append(conn)
        try:
            sr, sw = await asyncio.open_connection(*self.upstream)
        except OSError:
            cw.close()
            self._tasks.discard(task)
            return
        self._writers += [cw, sw]
        front, back = _Frontend(conn), _Backend(conn)

        async def pump(r: asyncio.StreamReader, w: asyncio.StreamWriter, up: bool) -> None:
            try:
                while data := await r.read(65536):
                    if up:
                        conn.writes += 1
                        front.feed(data)
                    else:
                        conn.reads += 1
                        back.feed(data)
                    w.write(data)
                    await w.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                w.close()

        try:
            await asyncio.gather(pump(cr, sw, True), pump(sr, cw, False))
        finally:
            with contextlib.suppress(Exception):
                cw.close()
                sw.close()
            self._tasks.discard(task)


def per_turn(conns: list[PgConn], turns: int, who: str) -> list[str]:
    """Printable lines: each connection's messages and statements per turn (bench/pg_wire.py)."""

    def fmt(counter: Counter[str]) -> str:
        return ", ".join(f"{k} {v / turns:.2f}" for k, v in sorted(counter.items())) or "-"

    lines = []
    for c in conns:
        if not (c.front or c.back or c.writes or c.reads):
            continue
        io = f"writes {c.writes / turns:.2f}, reads {c.reads / turns:.2f} per turn"
        lines.append(f"  {who} conn {c.n} ({c.role()}): {io}")
        lines.append(f"    frontend: {fmt(c.front)}")
        lines.append(f"    backend:  {fmt(c.back)}")
        if c.notified:
            lines.append(f"    notifications received: {fmt(c.notified)}")
        for sql, k in sorted(c.statements.items(), key=lambda kv: -kv[1]):
            lines.append(f"    {k / turns:5.2f}  {short(sql)}")
    return lines

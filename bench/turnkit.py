"""Shared parts of bench/turn.py and bench/concurrency.py: a fake streaming model in its own
process, a real `agentd serve` subprocess on SQLite or a fresh Postgres database, the
server's CPU time from /proc, percentiles.

The fake model (tests/support/fakes/openai_server.py, the Chat Completions wire format) runs
in a separate process so neither the benchmark's clients nor the server share its GIL: the
provider path is measured over real HTTP, and the server's CPU is only its own.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PG_ADMIN_DSN = os.environ.get("AGENTD_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
MODEL = "bench-model"
TOOL_MARK = "USE_A_TOOL"  # a prompt containing this gets a read_file call, then the answer
ANSWER = "Hello there, all is well."
CLK_TCK = os.sysconf("SC_CLK_TCK")
CHUNK_WIDTH = 7  # digits of a numbered chunk


# -- the fake model (own process) ----------------------------------------------------------


def serve_model(chunks: int = 0, chunk_gap_ms: float = 0.0) -> None:
    """Run the fake model until stdin closes; prints its base URL first. `chunks` > 0: the
    answer is that many numbered chunks instead (`numbered_answer`, bench/fanout.py).
    `chunk_gap_ms` > 0: that pause between chunks, as a real model streams (bench/history.py)."""
    from tests.support.fakes.openai_server import Completion, FakeOpenAI, ToolCallScript

    gap = chunk_gap_ms / 1000
    text = (
        Completion(content=numbered_answer(chunks), chunk_delay=gap)
        if chunks
        else Completion.from_text(ANSWER, chunk_size=6, chunk_delay=gap)
    )
    call = ToolCallScript(id="call_1", name="read_file", arguments='{"path": "README.md"}')
    tool = Completion(tool_calls=[call], chunk_delay=gap)

    class BenchModel(FakeOpenAI):
        """Answers by what the request holds (concurrent sessions interleave, so no fixed script)."""

        async def _handle(self, request: Any) -> Any:
            body = json.loads(await request.body())  # starlette caches it for the base class
            last = body["messages"][-1]
            wants_tool = last.get("role") == "user" and TOOL_MARK in json.dumps(last)
            self.enqueue(tool if wants_tool else text)  # no await until the base class pops it
            self.requests.clear()  # bounded: the benchmark never reads them
            return await super()._handle(request)

    # validate=False: checking bodies against the openai package's types is the fake's own
    # CPU, not the server's — it would only inflate the model's time.
    with BenchModel(validate=False) as fake:
        print(fake.base_url, flush=True)
        sys.stdin.read()


def numbered_answer(chunks: int) -> list[str]:
    """An answer of `chunks` chunks, chunk i being `i` in CHUNK_WIDTH digits: a client can
    tell which chunk it got (order, loss, duplicates) without any other bookkeeping."""
    return [f"{i:0{CHUNK_WIDTH}d}" for i in range(chunks)]


@contextmanager
def model_process(chunks: int = 0, chunk_gap_ms: float = 0.0) -> Iterator[str]:
    """The fake model in a subprocess; yields its base URL (…/v1)."""
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__)), "--serve-model", str(chunks), str(chunk_gap_ms)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http"):
            raise SystemExit(f"fake model did not start (exit {proc.poll()})")
        yield url
    finally:
        if proc.stdin:
            proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def model_time(base_url: str, n: int) -> list[float]:
    """The fake model's own time for a trivial answer, as a client sees it: request → end of stream."""
    import httpx

    body = {"model": MODEL, "stream": True, "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
    out: list[float] = []
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        for i in range(n + 3):
            t0 = time.perf_counter()
            async with http.stream("POST", "/chat/completions", json=body) as resp:
                async for _ in resp.aiter_bytes():
                    pass
            if i >= 3:  # the first few open the connection and warm the fake
                out.append(time.perf_counter() - t0)
    return out


# -- databases -----------------------------------------------------------------------------


async def pg_available() -> bool:
    import asyncpg

    try:
        conn = await asyncio.wait_for(asyncpg.connect(PG_ADMIN_DSN), 3)
    except (TimeoutError, OSError, asyncpg.PostgresError):
        return False
    await conn.close()
    return True


@asynccontextmanager
async def postgres_database() -> AsyncIterator[str]:
    """A fresh, uniquely named database (as the test fixtures make); dropped afterwards."""
    import asyncpg

    name = f"agentd_bench_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(PG_ADMIN_DSN)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    base = PG_ADMIN_DSN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+asyncpg://")
    try:
        yield f"{base}/{name}"
    finally:
        admin = await asyncpg.connect(PG_ADMIN_DSN)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


@asynccontextmanager
async def database(kind: str, home: Path) -> AsyncIterator[str]:
    if kind == "sqlite":
        yield f"sqlite+aiosqlite:///{home / 'bench.db'}"
    else:
        async with postgres_database() as url:
            yield url


# -- the server ----------------------------------------------------------------------------


@dataclass
class Server:
    base: str
    pid: int
    workspace: Path
    db_url: str = ""  # its database (bench/floor.py copies the schema for the bare relay)

    def cpu_s(self) -> float:
        """User + system CPU of the server process (all its threads) so far."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime (fields 14, 15)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@asynccontextmanager
async def agentd_server(kind: str, model_url: str, *, prelude: str = "") -> AsyncIterator[Server]:
    """`agentd serve` in a subprocess, the OpenAI provider pointed at the fake model.

    `prelude`: Python run in the server process before the server starts (profiling hooks)."""
    home = Path(tempfile.mkdtemp(prefix="agentd-bench-"))
    try:
        async with _served(kind, model_url, prelude, home) as server:
            yield server
    finally:
        shutil.rmtree(home, ignore_errors=True)


@asynccontextmanager
async def _served(kind: str, model_url: str, prelude: str, home: Path) -> AsyncIterator[Server]:
    workspace = home / "ws"
    workspace.mkdir()
    (workspace / "README.md").write_text("# Bench\n\nA small file for read_file.\n")
    async with database(kind, home) as db_url:
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
        env.update(
            HOME=str(home), AGENTD_HOME=str(home / "agentd"), AGENTD_PORT=str(port),
            AGENTD_DATABASE_URL=db_url, AGENTD_PROVIDER="openai", AGENTD_MODEL=MODEL,
            AGENTD_OPENAI_BASE_URL=model_url, AGENTD_OPENAI_API_KEY="sk-bench",
            AGENTD_PERMISSION_MODE="bypass", AGENTD_RATE_LIMIT_PER_S="0",
            PYTHONPATH=str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
        )  # fmt: skip
        code = prelude + "\nfrom agentd.cli import main; main()"
        cmd = [sys.executable, "-c", code, "serve", "--log-level", "warning"]
        # Its log goes to a file: a pipe nobody reads while the bench runs would fill with a
        # burst's warnings and stall the server on its next log line.
        log = home / "serve.log"
        with log.open("wb") as err:
            proc = subprocess.Popen(  # noqa: ASYNC220 - once per run, before anything is measured
                cmd, env=env, stdout=subprocess.DEVNULL, stderr=err, cwd=ROOT
            )
        try:
            await asyncio.to_thread(_wait_healthy, proc, port, log)
            yield Server(f"http://127.0.0.1:{port}", proc.pid, workspace, db_url)
        finally:
            proc.terminate()
            try:
                await asyncio.to_thread(proc.wait, 15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            _report_log(kind, log)
            if keep := os.environ.get("BENCH_KEEP_LOG"):  # a directory: the whole log, to read after
                shutil.copy(log, Path(keep) / f"serve-{kind}-{port}.log")


def _report_log(kind: str, log: Path) -> None:
    """The server's warnings and errors, counted, and the last few (the figures' context)."""
    lines = [x for x in log.read_text(errors="replace").splitlines() if " WARNING " in x or " ERROR " in x]
    if lines:
        print(f"  {kind} server log: {len(lines)} warnings/errors; the last:", flush=True)
        for line in lines[-5:]:
            print(f"    {line[:300]}", flush=True)


def _wait_healthy(proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
    started = time.perf_counter()
    while True:
        if proc.poll() is not None:
            err = log.read_text(errors="replace")
            raise SystemExit(f"agentd serve exited with {proc.returncode}:\n{err[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        if time.perf_counter() - started > 90:
            raise SystemExit("agentd serve never became healthy")
        time.sleep(0.02)


async def backends() -> list[str]:
    return ["sqlite", "postgres"] if await pg_available() else ["sqlite"]


def pct(values: list[float], p: float) -> float:
    """The p-th percentile (nearest rank), in milliseconds."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))] * 1000


# -- the measured-turn benches' command line -----------------------------------------------


def turn_parser(doc: str | None, *, turns: int = 200) -> argparse.ArgumentParser:
    """The options every bench driving warm turns through one server takes (bench/loop_passes.py,
    bench/object_counts.py): how many turns, which database, which kind of turn, whose tree."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=turns)
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--kind", choices=["trivial", "one-tool"], default="trivial")
    parser.add_argument("--tree", help="whose `agentd serve` (a source tree, e.g. a `git archive` of a base)")
    return parser


def parse_turn_args(parser: argparse.ArgumentParser, argv: list[str] | None = None) -> argparse.Namespace:
    """The parsed options, `--tree` applied: the server started is that tree's."""
    global ROOT
    ns = parser.parse_args(argv)
    if ns.tree:
        ROOT = Path(ns.tree).resolve()
    return ns


if __name__ == "__main__" and "--serve-model" in sys.argv:
    args = sys.argv[2:]
    serve_model(int(args[0]) if args else 0, float(args[1]) if len(args) > 1 else 0.0)

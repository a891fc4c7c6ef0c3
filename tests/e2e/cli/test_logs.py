"""R-O: structured logs — `AGENTD_LOG_FORMAT=json` makes every line of `agentd serve`,
uvicorn's included, one JSON object with timestamp, level, logger and event."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

import httpx

from tests.support.proc import agentd_process, free_port, wait_healthy


async def serve_and_read_log(tmp_path: Path, log_format: str) -> str:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    env.update(AGENTD_HOME=str(tmp_path / "home"), HOME=str(tmp_path), AGENTD_LOG_FORMAT=log_format)
    log = tmp_path / f"serve-{log_format}.log"
    args = ["serve", "--port", str(port), "--database-url", f"sqlite+aiosqlite:///{tmp_path / 'a.db'}"]
    async with agentd_process(args, env=env, log=log) as proc:
        base = f"http://127.0.0.1:{port}"
        await wait_healthy(base, proc, log)
        async with httpx.AsyncClient(base_url=base) as http:
            await http.get("/readyz")
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(30):
            await proc.wait()
    return await asyncio.to_thread(log.read_text)


async def test_json_logs_are_one_object_per_line(tmp_path: Path) -> None:
    output = await serve_and_read_log(tmp_path, "json")
    lines = [line for line in output.splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line parses
    assert all({"event", "level", "logger", "timestamp"} <= r.keys() for r in records)
    loggers = {r["logger"] for r in records}
    assert "agentd" in loggers and "uvicorn.error" in loggers  # ours and uvicorn's alike
    assert any(r["event"].startswith("database: sqlite") for r in records)
    assert any("GET /readyz" in r["event"] and r["logger"] == "uvicorn.access" for r in records)


async def test_text_logs_are_readable_lines(tmp_path: Path) -> None:
    output = await serve_and_read_log(tmp_path, "text")
    assert " INFO agentd: database: sqlite" in output
    assert not output.lstrip().startswith("{")

"""`agentd serve` answers `/healthz` as soon as its socket listens, while the app loads
(issue 32 item 2, agentd/serve.py `StartingApp`): requests sent at the instant /healthz first
answers — while /readyz still says `starting` — are held and answered, over HTTP and
WebSocket, never refused; then /readyz turns 200 and the log says the server is ready."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from tests.support.client import ws_client
from tests.support.proc import agentd_process, free_port, server_env

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}


async def first_healthy(http: httpx.AsyncClient, proc: asyncio.subprocess.Process, log: Path) -> None:
    """Polls /healthz until its first 200 (the process started a moment ago)."""
    for _ in range(6000):  # up to ~60 s on a loaded host
        if proc.returncode is not None:
            raise AssertionError(f"exited with {proc.returncode}:\n{await asyncio.to_thread(log.read_text)}")
        try:
            if (await http.get("/healthz")).status_code == 200:
                return
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.01)
    raise AssertionError(f"never healthy:\n{await asyncio.to_thread(log.read_text)}")


async def test_requests_sent_when_healthz_first_answers_are_held_and_answered(tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = server_env(tmp_path, port=str(port), provider="scripted")
    log = tmp_path / "serve.log"
    async with (
        agentd_process(["serve", "--log-level", "info"], env=env, log=log) as proc,
        httpx.AsyncClient(base_url=base, timeout=60) as http,
    ):
        await first_healthy(http, proc, log)
        readyz, rpc, ws = await asyncio.gather(
            http.get("/readyz"), http.post("/rpc", json=INITIALIZE), ws_client(base, open_timeout=60)
        )
        # Sent while the app was still loading (so they were held)...
        assert (readyz.status_code, readyz.json()["status"]) == (503, "starting"), readyz.text
        # ...and answered by it.
        assert rpc.status_code == 200 and rpc.json()["result"]["protocolVersion"] == 1, rpc.text
        session = await ws.call("session/new", {"cwd": str(tmp_path), "mcpServers": []})
        assert session["sessionId"]
        await ws.close()
        ready = await http.get("/readyz")
        assert (ready.status_code, ready.json()["status"]) == (200, "ok"), ready.text
    output = await asyncio.to_thread(log.read_text)
    assert output.count("ready: serving every request") == 1, output
    # The early /healthz came first: the ready line follows the first health check's access log.
    assert output.index('"GET /healthz HTTP/1.1" 200') < output.index("ready: serving every request"), output

"""How soon revoking a token ends what it holds open (issue 28 item 3; prints figures, no
asserts).

    .venv/bin/python bench/revocation.py [--rounds 5] [--smoke]

A real `agentd serve` (SQLite, tokens on, the default AGENTD_TOKEN_RECHECK_S). Each round
creates a token, opens with it a WebSocket, an SSE stream of a session and a Streamable HTTP
connection with its `GET /acp` event stream, then revokes it from another connection to the
database (as `agentd token revoke` does) and times, from the revoke's commit, the WebSocket's
close (4401) and each stream's last message (`_agentd/token_revoked`). Target: every one
within 1 s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import websockets  # noqa: E402

from agentd.infra.auth import create_token  # noqa: E402
from agentd.protocol.agentd import AGENTD_CLIENT  # noqa: E402
from agentd.store.db import Store  # noqa: E402

TARGET_S = 1.0
REVOKED = "_agentd/token_revoked"
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": 1, "_meta": AGENTD_CLIENT},
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def one_round(base: str, db: str, cwd: Path) -> dict[str, float]:
    store = await Store.open(db)
    try:
        token, record = await create_token(store, "alice")
    finally:
        await store.close()
    auth = {"Authorization": f"Bearer {token}"}
    ended: dict[str, float] = {}
    live = {name: asyncio.Event() for name in ("websocket", "sse", "streamable http")}
    async with httpx.AsyncClient(base_url=base, timeout=60, headers=auth) as http:
        new = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "session/new",
            "params": {"cwd": str(cwd), "mcpServers": []},
        }
        sid = (await http.post("/rpc", json=new)).json()["result"]["sessionId"]

        async def websocket() -> None:
            url = base.replace("http://", "ws://") + "/acp"
            async with websockets.connect(url, additional_headers=auth) as ws:
                await ws.send(json.dumps(INIT))
                await ws.recv()
                live["websocket"].set()
                await ws.wait_closed()
                ended["websocket"] = time.perf_counter()

        async def sse() -> None:
            async with http.stream("GET", f"/sessions/{sid}/events") as stream:
                async for line in stream.aiter_lines():
                    if line.startswith("event: _agentd/session/snapshot"):
                        live["sse"].set()
                    if line == f"event: {REVOKED}":
                        ended["sse"] = time.perf_counter()

        async def streamable() -> None:
            opened = await http.post("/acp", json=INIT)
            conn = {"Acp-Connection-Id": opened.headers["Acp-Connection-Id"]}
            async with http.stream("GET", "/acp", headers={**conn, "Accept": "text/event-stream"}) as stream:
                live["streamable http"].set()
                async for line in stream.aiter_lines():
                    if REVOKED in line:
                        ended["streamable http"] = time.perf_counter()

        tasks = [asyncio.create_task(job()) for job in (websocket, sse, streamable)]
        for event in live.values():
            await event.wait()
        store = await Store.open(db)
        try:
            await store.revoke_token(record.id)
            revoked_at = time.perf_counter()
        finally:
            await store.close()
        async with asyncio.timeout(30):
            await asyncio.gather(*tasks)
    return {name: at - revoked_at for name, at in ended.items()}


async def main(args: argparse.Namespace) -> None:
    rounds = 2 if args.smoke else args.rounds
    with tempfile.TemporaryDirectory(prefix="agentd-revocation-") as tmp:
        home = Path(tmp)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        db = f"sqlite+aiosqlite:///{home / 'agentd.db'}"
        cwd = home / "agentd" / "workspaces" / "alice"
        cwd.mkdir(parents=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
        env.update(
            HOME=str(home), AGENTD_HOME=str(home / "agentd"), AGENTD_AUTH="token", AGENTD_PORT=str(port),
            AGENTD_DATABASE_URL=db, AGENTD_PROVIDER="scripted",
        )  # fmt: skip
        exe = Path(sys.executable).with_name("agentd")
        cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "agentd.cli"]
        with (home / "serve.log").open("wb") as log:
            proc = await asyncio.create_subprocess_exec(
                *cmd,
                "serve",
                "--log-level",
                "warning",
                env=env,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        try:
            async with httpx.AsyncClient() as http:
                for _ in range(600):
                    try:
                        if (await http.get(f"{base}/healthz", timeout=2)).status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    await asyncio.sleep(0.05)
            results = [await one_round(base, db, cwd) for _ in range(rounds)]
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
    worst = 0.0
    for name in ("websocket", "sse", "streamable http"):
        times = sorted(r[name] for r in results)
        worst = max(worst, times[-1])
        print(
            f"{name:<16} rounds={len(times)} revoke -> ended: median={times[len(times) // 2] * 1000:6.0f} ms "
            f"max={times[-1] * 1000:6.0f} ms"
        )
    print(
        f"worst {worst * 1000:.0f} ms; target <= {TARGET_S:g} s: {'met' if worst <= TARGET_S else 'NOT met'}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="a short run (CI)")
    asyncio.run(main(parser.parse_args()))

"""`agentd demo`: a real server in-process (SQLite in a temp dir, the scripted demo
provider), a real WebSocket client, and the session's events printed as they stream."""

from __future__ import annotations

import itertools
import json
import tempfile
from pathlib import Path
from typing import Any

import websockets
from pydantic import SecretStr
from rich.text import Text

from agentd.app import create_app
from agentd.chat import screen, show_update
from agentd.core import PermissionMode
from agentd.embedded import serve_in_background
from agentd.infra import ProviderName, Settings
from agentd.protocol import AGENTD_CLIENT


class DemoClient:
    """A tiny ACP client: sends requests, prints notifications, approves permissions."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.ids = itertools.count(1)

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        req_id = next(self.ids)
        await self.ws.send(json.dumps({"jsonrpc": "2.0", "id": req_id, "method": method, "params": params}))
        while True:
            msg = json.loads(await self.ws.recv())
            if msg.get("id") == req_id and "method" not in msg:
                if "error" in msg:
                    raise RuntimeError(f"{method} failed: {msg['error']}")
                result: dict[str, Any] = msg["result"]
                return result
            await self.on_message(msg)

    async def on_message(self, msg: dict[str, Any]) -> None:
        method = msg.get("method")
        params = msg.get("params", {})
        if method == "session/update":
            show_update(params["update"])
        elif method == "session/request_permission":
            call = params["toolCall"]
            screen.line(
                Text.assemble(
                    ("? permission: ", "yellow"),
                    str(call.get("title")),
                    " → ",
                    ("allow once", "green"),
                    " (demo auto-approves)",
                )
            )
            await self.ws.send(
                json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": msg["id"],
                        "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}},
                    }
                )
            )
        elif method == "_agentd/event":
            if params["kind"] == "turn_ended":
                ev = params["event"]
                screen.line(f"turn ended: {ev['outcome']} ({ev['stopReason']})", style="dim")


async def run_demo(workspace: Path | None, prompt: str) -> int:
    with tempfile.TemporaryDirectory(prefix="agentd-demo-") as tmp:
        ws_dir = (workspace or Path(tmp) / "workspace").resolve()
        ws_dir.mkdir(parents=True, exist_ok=True)
        # Everything explicit: the demo must not pick up a real server's AGENTD_* settings.
        home = Path(tmp) / "home"
        settings = Settings(
            home=home,
            database_url=SecretStr(f"sqlite+aiosqlite:///{home / 'demo.db'}"),
            workspace_root=None,
            provider=ProviderName.SCRIPTED,
            script=None,
            hooks_file=None,
            max_turns=None,
            permission_mode=PermissionMode.DEFAULT,
        )
        screen.line(Text.assemble(("agentd demo", "bold"), f" — scripted provider, workspace {ws_dir}\n"))
        async with serve_in_background(create_app(settings)) as base:
            url = base.replace("http://", "ws://") + "/acp"
            async with websockets.connect(url) as ws:
                client = DemoClient(ws)
                init = await client.call(
                    "initialize", {"protocolVersion": 1, "clientCapabilities": {}, "_meta": AGENTD_CLIENT}
                )
                info = init["agentInfo"]
                screen.line(f"connected to {info['name']} {info['version']}", style="dim")
                session = await client.call("session/new", {"cwd": str(ws_dir), "mcpServers": []})
                screen.line(f"session {session['sessionId']}\n", style="dim")
                screen.line(f"> {prompt}\n", style="bold")
                result = await client.call(
                    "session/prompt",
                    {"sessionId": session["sessionId"], "prompt": [{"type": "text", "text": prompt}]},
                )
                screen.line(Text.assemble("\n", ("stopReason: ", "bold"), result["stopReason"]))
                files = sorted(p.name for p in ws_dir.iterdir())
                screen.line(Text.assemble(("workspace now holds: ", "bold"), ", ".join(files) or "(nothing)"))
        return 0 if result["stopReason"] == "end_turn" else 1

"""The sandbox cannot reach agentd (issue 28, item 1): a command run by `bash` — in the
foreground, with `run_in_background` and as `!cmd` — cannot make the server start a
process, change a session or read one, in every combination of AGENTD_AUTH × sandbox
network × listen address.

One real `agentd serve` per combination, with real bubblewrap; a scripted model runs a
probe (tests/support/fakes/sandbox_probe.py) that tries POST /rpc (session/new declaring a
stdio MCP server that would write a marker, session/list, a rename, a prompt), the
WebSocket /acp, Streamable HTTP, SSE, /metrics, /openapi.json and /docs by 127.0.0.1,
`localhost`, `[::1]` (and the host's own address when the server listens on 0.0.0.0),
directly and through the egress proxy, and over every Unix socket it can see. The same
probe run outside the sandbox reaches the server: the probe is able, the sandbox stops it.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.client import WsClient, text_prompt, ws_client
from tests.support.paths import SUPPORT_DIR
from tests.support.polling import until
from tests.support.proc import agentd_command, agentd_serve, server_env, write_script
from tests.support.session import new_session

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

PROBE = str(SUPPORT_DIR / "fakes" / "sandbox_probe.py")
ROUTES = 10  # requests the probe makes per host and per socket
PROBE_COMMAND = f"{sys.executable} -I {PROBE}"


def host_address() -> str | None:
    """This machine's address on its default route (no packet is sent), if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))
        except OSError:
            return None
        return str(s.getsockname()[0])


def create_token(home: Path, settings: dict[str, str]) -> str:
    done = subprocess.run(
        [*agentd_command(), "token", "create", "--principal", "alice"],
        env=server_env(home, **settings),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return next(word for word in done.stdout.split() if word.startswith("agentd_"))


def read_probe(ws: Path, label: str) -> dict[str, Any] | None:
    path = ws / f"probe-{label}.json"
    return json.loads(path.read_text()) if path.exists() else None


COMBINATIONS = [
    ("none", "on", "127.0.0.1"),
    ("none", "off", "127.0.0.1"),
    ("token", "on", "127.0.0.1"),
    ("token", "off", "127.0.0.1"),
    ("token", "on", "0.0.0.0"),
    ("token", "off", "0.0.0.0"),
]


@pytest.mark.parametrize(("auth", "network", "listen"), COMBINATIONS)
async def test_a_sandboxed_command_cannot_reach_agentd(
    tmp_path: Path, auth: str, network: str, listen: str
) -> None:
    home, roots = tmp_path / "home", tmp_path / "roots"
    ws = roots / "alice"
    ws.mkdir(parents=True)
    marker = tmp_path / "escaped-marker"  # what the declared MCP server would write, on the host
    calls = [
        {"name": "bash", "arguments": {"command": f"{PROBE_COMMAND} fg"}, "id": "call_fg"},
        {
            "name": "bash",
            "arguments": {"command": f"{PROBE_COMMAND} bg", "run_in_background": True},
            "id": "call_bg",
        },
    ]
    script = write_script(tmp_path / "script.json", [{"tool_calls": calls}, {"text": "probed"}], loop=False)
    settings = {
        "auth": auth,
        "host": listen,
        "sandbox": "bwrap",
        "sandbox_network": network,
        "workspace_root": str(roots),
        "permission_mode": "bypass",
        "script": str(script),
    }
    await asyncio.to_thread(home.mkdir)
    token = await asyncio.to_thread(create_token, home, settings) if auth == "token" else None
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with agentd_serve(home, **settings) as server:
        port = int(server.base_url.rsplit(":", 1)[1])
        client: WsClient = await ws_client(server.base_url, additional_headers=headers)
        victim = await new_session(client, ws)
        hosts = ["127.0.0.1", "localhost", "[::1]"]
        if listen == "0.0.0.0" and (address := host_address()) is not None:
            hosts.append(address)
        config = {"hosts": hosts, "port": port, "victim": victim, "marker": str(marker), "cwd": str(ws)}
        await asyncio.to_thread((ws / "probe-config.json").write_text, json.dumps(config))

        result = await client.call("session/prompt", text_prompt(victim, "probe"))
        assert result["stopReason"] == "end_turn"
        await until(lambda: read_probe(ws, "bg"), what="the background probe to finish")
        result = await client.call("session/prompt", text_prompt(victim, f"!{PROBE_COMMAND} bang"))
        assert result["stopReason"] == "end_turn"

        for label in ("fg", "bg", "bang"):
            probe = read_probe(ws, label)
            assert probe is not None, label
            sockets = probe["sockets"]
            # Only the proxy's own socket is in sight, and only with the network on.
            assert sockets == (["/run/agentd/egress.sock"] if network == "on" else []), sockets
            proxied = len(hosts) if network == "on" else 0
            results = probe["results"]
            assert len(results) == ROUTES * (len(hosts) + len(sockets) + proxied), label  # every probe ran
            reached = [r for r in results if r["outcome"].startswith("reached")]
            assert reached == [], reached
            # Through the proxy every attempt was refused by it (not merely lost).
            assert all(
                r["outcome"] == "refused" for r in results if r["proxy"] or r["host"].startswith("unix:")
            )

        # The server side: no process started, no session made or changed.
        assert not marker.exists()
        sessions = (await client.call("session/list", {}))["sessions"]
        assert [s["sessionId"] for s in sessions] == [victim]
        assert sessions[0].get("title") != "pwned"

        # The same probe outside the sandbox does reach the server (the probe is able).
        outside = tmp_path / "outside"
        await asyncio.to_thread(outside.mkdir)
        # (Not over the host's Unix sockets: they belong to shared daemons.)
        control = {
            **config,
            "hosts": ["127.0.0.1"],
            "marker": str(tmp_path / "control"),
            "unix": False,
            "timeout": 30,
            "routes": ["rpc session/list"],
        }
        await asyncio.to_thread((outside / "probe-config.json").write_text, json.dumps(control))
        env = server_env(tmp_path)
        env.pop("HTTP_PROXY", None)
        await asyncio.to_thread(
            subprocess.run, [*PROBE_COMMAND.split(), "control"], cwd=outside, env=env, check=True, timeout=60
        )
        probe = read_probe(outside, "control")
        assert probe is not None
        listed = next(r for r in probe["results"] if r["route"] == "rpc session/list" and not r["proxy"])
        expected = "reached: HTTP/1.1 200" if auth == "none" else "reached: HTTP/1.1 401"
        assert listed["outcome"].startswith(expected), listed
        await client.close()

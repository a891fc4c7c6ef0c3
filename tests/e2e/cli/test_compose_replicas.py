"""docker-compose.yml's `replicas` profile (R-C1, issue 15 item 6): two agentd replicas on one
Postgres behind nginx. No container engine here: the compose file and deploy/nginx.conf are
parsed and checked for what they promise (each replica its own id and home, the same database
and workspace; the proxy passes WebSocket upgrades, does not buffer event streams, does not
cut long-lived connections, pins Streamable HTTP clients). Where nginx is installed, `nginx -t`
checks the file and two real replicas on Postgres serve a WebSocket and a Streamable HTTP
client through it; where docker compose is, `docker compose config` checks the profile."""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from acp import text_block

from agentd.infra.config import Settings
from tests.support.acp_http import http_sdk
from tests.support.client import WsClient, agent_text, text_prompt
from tests.support.databases import postgres_database
from tests.support.paths import REPO_ROOT
from tests.support.polling import value_of
from tests.support.proc import agentd_serve, free_port, write_script
from tests.support.session import new_session

PROFILE = "replicas"


@dataclass
class Directive:
    name: str
    args: list[str]
    block: list[Directive] = field(default_factory=list)

    def all(self, name: str) -> list[Directive]:
        return [d for d in self.block if d.name == name]

    def one(self, name: str) -> Directive:
        (found,) = self.all(name)
        return found


def parse_nginx(text: str) -> Directive:
    """nginx's configuration syntax: `name args;` and `name args { … }`, `#` comments, quotes."""
    tokens = re.findall(r"'[^']*'|\"[^\"]*\"|[{};]|[^\s{};'\"]+", re.sub(r"#[^\n]*", "", text))
    root = Directive("", [])
    stack: list[Directive] = [root]
    words: list[str] = []
    for tok in tokens:
        if tok == ";":
            stack[-1].block.append(Directive(words[0], words[1:]))
            words = []
        elif tok == "{":
            d = Directive(words[0], words[1:])
            stack[-1].block.append(d)
            stack.append(d)
            words = []
        elif tok == "}":
            assert not words, f"unterminated directive {words}"
            stack.pop()
        else:
            words.append(tok.strip("'\""))
    assert len(stack) == 1 and not words, "unbalanced braces"
    return root


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())
    return loaded


def in_profile(service: dict[str, Any]) -> bool:
    return PROFILE in service.get("profiles", [])


def replicas() -> dict[str, dict[str, Any]]:
    """The agentd services that run with the profile (built from this repository)."""
    services = compose()["services"]
    return {name: s for name, s in services.items() if s.get("build") == "." and (
        not s.get("profiles") or in_profile(s))}  # fmt: skip


def proxy() -> dict[str, Any]:
    (found,) = [
        s for s in compose()["services"].values() if in_profile(s) and "image" in s and s.get("ports")
    ]  # the profile's one published image (Redis is only reachable inside)
    return dict(found)


def proxy_config() -> tuple[Path, Directive]:
    mount = next(v for v in proxy()["volumes"] if "/etc/nginx/" in v)
    source = REPO_ROOT / mount.split(":")[0]
    assert source.is_file(), f"{source}: the proxy's configuration is not in the repository"
    assert mount.split(":")[1].startswith("/etc/nginx/conf.d/") and mount.endswith(":ro")
    return source, parse_nginx(source.read_text())


def seconds(value: str) -> float:
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "": 1}
    return sum(float(n) * units[u] for n, u in re.findall(r"(\d+)(ms|s|m|h|d|)", value))


def test_the_profile_runs_two_replicas_with_their_own_ids_and_homes_on_one_database() -> None:
    services = compose()["services"]
    assert "profiles" not in services["postgres"]  # shared by the single replica and the profile
    found = replicas()
    assert len(found) == 2, list(found)
    envs = [s["environment"] for s in found.values()]
    ids = [env["AGENTD_REPLICA_ID"] for env in envs]
    assert len(set(ids)) == 2 and all(ids), ids
    assert len({env["AGENTD_DATABASE_URL"] for env in envs}) == 1
    assert "@postgres:" in envs[0]["AGENTD_DATABASE_URL"]
    for s in found.values():
        assert s["depends_on"]["postgres"]["condition"] == "service_healthy"
        assert s["environment"]["AGENTD_AUTH"] == "token"  # reachable beyond loopback (R-X1)
        assert float(s["environment"]["AGENTD_LEASE_TTL_S"]) > 0
    homes = [
        next(v.split(":")[0] for v in s["volumes"] if v.endswith(":/var/lib/agentd")) for s in found.values()
    ]
    assert len(set(homes)) == 2, homes  # replica-id, logs: one home per replica
    workspaces = [{v for v in s["volumes"] if ":/workspaces/" in v} for s in found.values()]
    assert workspaces[0] == workspaces[1] and workspaces[0]  # either replica can run any session
    # The single-replica default is unchanged: `docker compose up` starts only the first one.
    assert [name for name, s in found.items() if not s.get("profiles")] == ["agentd"]


def test_the_profile_runs_redis_and_every_replica_uses_it_for_live_text() -> None:
    redis = compose()["services"]["redis"]
    assert in_profile(redis) and re.fullmatch(r"redis:[\w.-]+", redis["image"]), redis
    assert "ports" not in redis and "volumes" not in redis  # pub/sub only: nothing kept, not published
    urls = {s["environment"]["AGENTD_REDIS_URL"] for s in replicas().values()}
    # One broker for all: a replica on NOTIFY would not hear one on Redis (nor the reverse).
    assert len(urls) == 1 and urls.pop().startswith("redis://redis:6379/"), urls
    assert Settings(redis_url="redis://redis:6379/0").redis_url  # a setting agentd knows


def test_the_proxy_is_an_official_image_in_front_of_exactly_the_replicas() -> None:
    p = proxy()
    assert re.fullmatch(r"(nginx|caddy):[\w.-]+", p["image"]), p["image"]
    assert set(p["depends_on"]) == set(replicas())
    assert all(dep["condition"] == "service_healthy" for dep in p["depends_on"].values())
    _, conf = proxy_config()
    (server,) = conf.all("server")
    (listen,) = server.one("listen").args
    published = [str(port).rsplit(":", 1)[-1] for port in p["ports"]]
    assert listen in published, (published, listen)  # the proxy's own port is the one published
    want = {f"{name}:{s['environment']['AGENTD_PORT']}" for name, s in replicas().items()}
    upstreams = conf.all("upstream")
    assert len(upstreams) >= 1
    for upstream in upstreams:
        assert {d.args[0] for d in upstream.all("server")} == want, upstream.name


def test_the_proxy_passes_websockets_and_streams_unbuffered_without_cutting_them() -> None:
    _, conf = proxy_config()
    (server,) = conf.all("server")
    settings = Settings()

    def value(name: str) -> list[str]:
        return server.one(name).args

    assert value("proxy_http_version") == ["1.1"]
    headers = {d.args[0].lower(): d.args[1] for d in server.all("proxy_set_header")}
    assert headers["upgrade"] == "$http_upgrade"
    # Connection: `upgrade` for a handshake, empty otherwise (keep-alive to the replicas).
    connection_map = next(m for m in conf.all("map") if m.args == ["$http_upgrade", headers["connection"]])
    mapped = {d.name: d.args[0] if d.args else "" for d in connection_map.block}
    assert mapped["default"] == "upgrade" and mapped[""] == ""
    assert value("proxy_buffering") == ["off"] and value("proxy_request_buffering") == ["off"]
    for timeout in ("proxy_read_timeout", "proxy_send_timeout"):
        # Longer than a long turn, and many SSE keepalive periods.
        assert seconds(value(timeout)[0]) >= max(600, 10 * settings.sse_heartbeat_s), timeout
    assert seconds(value("client_max_body_size")[0].replace("m", "")) * 2**20 >= settings.max_frame_bytes
    # Every location proxies to the replicas, and Streamable HTTP's connections stay on one.
    locations = {tuple(d.args): d for d in server.all("location")}
    assert set(locations) == {("=", "/acp"), ("/",)}
    pinned = {u.args[0] for u in conf.all("upstream") if u.all("ip_hash") or u.all("hash")}
    acp_target = locations[("=", "/acp")].one("proxy_pass").args[0].removeprefix("http://")
    acp_map = next(m for m in conf.all("map") if m.args[1] == acp_target)
    assert acp_map.args[0] == "$http_upgrade"
    by_upgrade = {d.name: d.args[0] for d in acp_map.block}
    assert by_upgrade[""] in pinned  # plain POST/GET/DELETE /acp: pinned to one replica
    assert by_upgrade["default"] in {u.args[0] for u in conf.all("upstream")}  # WebSocket: any


def nginx_binary() -> str:
    nginx = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin")
    if nginx is None:
        pytest.skip("nginx is not installed here")
    return nginx


def local_nginx_conf(tmp_path: Path, replica_ports: dict[str, int], listen: int) -> Path:
    """deploy/nginx.conf as it is, its replicas and port on loopback, in a minimal main file."""
    source, _ = proxy_config()
    site = re.sub(
        r"server ([\w-]+):(\d+)",
        lambda m: f"server 127.0.0.1:{replica_ports.get(m[1], m[2])}",
        source.read_text(),
    )
    site = re.sub(r"listen \d+;", f"listen 127.0.0.1:{listen};", site)
    (tmp_path / "site.conf").write_text(site)
    temp = " ".join(f"{kind}_temp_path {tmp_path / kind};" for kind in ("client_body", "proxy", "fastcgi",
                                                                          "uwsgi", "scgi"))  # fmt: skip
    main = tmp_path / "main.conf"
    main.write_text(
        f"pid {tmp_path / 'nginx.pid'}; error_log {tmp_path / 'error.log'}; daemon off; events {{}}\n"
        f"http {{ access_log off; {temp} include {tmp_path / 'site.conf'}; }}\n"
    )
    return main


def test_nginx_accepts_the_configuration(tmp_path: Path) -> None:
    nginx = nginx_binary()
    main = local_nginx_conf(tmp_path, {}, free_port())
    out = subprocess.run(
        [nginx, "-t", "-c", str(main), "-p", str(tmp_path)], capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0, out.stderr


# A turn that waits on the client mid-stream: the permission request reaches the client only
# if the proxy passes the event stream on as it comes (agentd also asks nginx not to buffer
# its event streams, `X-Accel-Buffering: no`; the config says so for any proxy setting).
WRITE = {
    "text": "Writing.",
    "tool_calls": [{"name": "write_file", "arguments": {"path": "x.txt", "content": "x"}}],
}


async def allow_once(request: dict[str, Any]) -> dict[str, Any]:
    (option,) = [o for o in request["params"]["options"] if o["kind"] == "allow_once"]
    return {"outcome": {"outcome": "selected", "optionId": option["optionId"]}}


async def test_two_replicas_serve_websocket_and_streamable_http_clients_through_nginx(tmp_path: Path) -> None:
    nginx = nginx_binary()
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    script = write_script(tmp_path / "script.json", [WRITE, {"text": "Done."}, {"text": "Hello."}], loop=True)
    async with postgres_database() as url:
        settings = {"database_url": url, "script": str(script)}
        async with (
            agentd_serve(tmp_path / "a", replica_id="agentd-1", **settings) as a,
            agentd_serve(tmp_path / "b", replica_id="agentd-2", **settings) as b,
        ):
            ports = {name: int(r.base_url.rsplit(":", 1)[1]) for name, r in (("agentd", a), ("agentd-2", b))}
            listen = free_port()
            (tmp_path / "nginx").mkdir()
            main = local_nginx_conf(tmp_path / "nginx", ports, listen)
            log = (tmp_path / "nginx" / "out.log").open("wb")
            proxy_proc = await asyncio.create_subprocess_exec(
                nginx, "-c", str(main), "-p", str(tmp_path / "nginx"), stdout=log, stderr=log
            )
            log.close()
            base = f"http://127.0.0.1:{listen}"
            try:
                async with httpx.AsyncClient(base_url=base, timeout=10) as http:

                    async def ready() -> dict[str, Any] | None:
                        with contextlib.suppress(httpx.TransportError):
                            resp = await http.get("/readyz")
                            return dict(resp.json()) if resp.status_code == 200 else None
                        return None

                    assert (await value_of(ready, what="a replica ready through nginx"))["replica"] in (
                        "agentd-1", "agentd-2"
                    )  # fmt: skip
                # A WebSocket through the proxy (the upgrade passed on): a whole streamed turn.
                ws = await WsClient.connect(base)
                sid = await new_session(ws, workspace)
                ws.on_request = allow_once
                result = await ws.call("session/prompt", text_prompt(sid, "write"))
                assert result["stopReason"] == "end_turn" and agent_text(ws.updates(sid)) == "Writing.Done."
                await ws.close()
                # ACP Streamable HTTP: POSTs and the GET event stream reach the replica that
                # holds the connection (round-robin would split them: the connection is unknown).
                async with http_sdk(base) as (conn, client, _transport):
                    hsid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
                    done = await asyncio.wait_for(
                        conn.prompt(session_id=hsid, prompt=[text_block("write")]), 60
                    )
                    assert done.stop_reason == "end_turn"
                    assert len(client.permission_requests) == 1 and client.agent_text(hsid) == "Writing.Done."
            finally:
                with contextlib.suppress(ProcessLookupError):
                    proxy_proc.kill()
                await proxy_proc.wait()


def test_docker_compose_accepts_the_profile() -> None:
    docker = shutil.which("docker")
    if docker is None or subprocess.run([docker, "compose", "version"], capture_output=True).returncode != 0:
        pytest.skip("docker compose is not installed here")
    out = subprocess.run(
        [docker, "compose", "--profile", PROFILE, "config", "--services"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert set(out.stdout.split()) == {"postgres", *replicas(), "proxy"}

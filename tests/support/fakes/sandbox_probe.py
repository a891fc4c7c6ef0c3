"""What a hostile command in the sandbox tries against agentd's own API (issue 28, item 1).

Run by the `bash` tool inside the sandbox (stdlib only): `python -I sandbox_probe.py LABEL`
in a workspace holding `probe-config.json` ({"hosts", "port", "victim", "marker", "cwd"}).
Every route — POST /rpc (session/new declaring a stdio MCP server that would write the
marker, session/list, a rename and a prompt of the victim session), the WebSocket /acp,
Streamable HTTP POST /acp, the SSE stream, /metrics, /openapi.json, /docs — is tried on
every host, directly and (when HTTP_PROXY is set) through the proxy, and over every Unix
socket in sight. Each outcome is written to `probe-LABEL.json`:

- `unreachable: …` — no connection;
- `refused` — agentd's egress proxy answered with its refusal header;
- `reached: <status line>` — anything else answered: the test fails on it.
"""

import base64
import json
import os
import socket
import stat
import sys
from urllib.parse import urlsplit

TIMEOUT = 3.0
REFUSED_HEADER = b"x-agentd-egress: refused"


def rpc(method, params, id_=1):
    return json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}).encode()


def http_request(method, target, host, body=b"", extra=()):
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}", "Connection: close", *extra]
    if body:
        lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    return ("\r\n".join([*lines, "", ""])).encode() + body


def ws_handshake(path, host):
    key = base64.b64encode(os.urandom(16)).decode()
    extra = ("Upgrade: websocket", "Sec-WebSocket-Version: 13", f"Sec-WebSocket-Key: {key}")
    return http_request("GET", path, host, extra=extra).replace(b"Connection: close", b"Connection: Upgrade")


def ws_frame(payload):
    mask = os.urandom(4)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    n = len(payload)
    head = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + n.to_bytes(2, "big"))
    return head + mask + masked


def read_head(sock):
    data = b""
    while b"\r\n\r\n" not in data and len(data) < 65536:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def classify(head):
    if not head:
        return "unreachable: closed without an answer"
    if REFUSED_HEADER in head.lower():
        return "refused"
    return "reached: " + head.split(b"\r\n", 1)[0].decode("latin-1")


def open_direct(host, port):
    if host.startswith("unix:"):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(TIMEOUT)
        s.connect(host[5:])
        return s
    return socket.create_connection((host.strip("[]"), port), TIMEOUT)


def proxy_address():
    url = os.environ.get("HTTP_PROXY")
    if not url:
        return None
    parts = urlsplit(url)
    return parts.hostname, parts.port


def attempt(send, host, port, via_proxy, ws_after=None):
    """One request; through the proxy a plain request goes in absolute form and a WebSocket
    through a CONNECT tunnel."""
    try:
        if via_proxy:
            s = socket.create_connection(proxy_address(), TIMEOUT)
            if ws_after is not None:
                s.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
                head = read_head(s)
                if not head.startswith(b"HTTP/1.1 200"):
                    return classify(head)
            else:
                send = send.replace(b" /", f" http://{host}:{port}/".encode(), 1)
        else:
            s = open_direct(host, port)
        s.settimeout(TIMEOUT)
        s.sendall(send)
        head = read_head(s)
        if ws_after is not None and head.startswith(b"HTTP/1.1 101"):
            s.sendall(ws_after)  # initialize + session/new with the marker-writing MCP server
            more = s.recv(65536)
            head += b" | " + more[:200]
        s.close()
        return classify(head)
    except OSError as exc:
        return f"unreachable: {exc.__class__.__name__}: {exc}"


def unix_sockets():
    """Every Unix socket in the usual places (and the workspace)."""
    found = []
    for root in ("/run", "/var/run", "/tmp", "/dev/shm", "/var/tmp", os.getcwd(), os.path.expanduser("~")):
        for dirpath, dirnames, filenames in os.walk(root):
            if dirpath.count(os.sep) - root.count(os.sep) >= 4:
                dirnames[:] = []
            for name in filenames:
                path = os.path.join(dirpath, name)
                try:
                    if stat.S_ISSOCK(os.lstat(path).st_mode):
                        found.append(os.path.realpath(path))
                except OSError:
                    pass
    return sorted(set(found))


def main():
    global TIMEOUT
    label = sys.argv[1]
    with open("probe-config.json") as f:
        cfg = json.load(f)
    TIMEOUT = cfg.get("timeout", TIMEOUT)
    port, victim, cwd = cfg["port"], cfg["victim"], cfg["cwd"]
    mcp = {"name": "x", "command": "/bin/sh", "args": ["-c", f"echo escaped > {cfg['marker']}"], "env": []}
    new = rpc("session/new", {"cwd": cwd, "mcpServers": [mcp]})
    ws_payload = ws_frame(rpc("initialize", {"protocolVersion": 1})) + ws_frame(
        rpc("session/new", {"cwd": cwd, "mcpServers": [mcp]}, 2)
    )
    results = []
    sockets = unix_sockets() if cfg.get("unix", True) else []
    targets = [(h, False) for h in cfg["hosts"]] + [(f"unix:{p}", False) for p in sockets]
    if proxy_address() is not None:
        targets += [(h, True) for h in cfg["hosts"]]
    for host, via_proxy in targets:
        hdr = f"{host}:{port}" if not host.startswith("unix:") else "localhost"

        def req(method, path, body=b"", hdr=hdr):
            return http_request(method, path, hdr, body)

        routes = {
            "rpc session/list": req("POST", "/rpc", rpc("session/list", {})),
            "rpc session/new (stdio MCP)": req("POST", "/rpc", new),
            "rpc rename": req(
                "POST", "/rpc", rpc("_agentd/session/rename", {"sessionId": victim, "title": "pwned"})
            ),
            "rpc prompt": req(
                "POST",
                "/rpc",
                rpc("session/prompt", {"sessionId": victim, "prompt": [{"type": "text", "text": "!id"}]}),
            ),
            "streamable http initialize": req("POST", "/acp", rpc("initialize", {"protocolVersion": 1})),
            "sse events": req("GET", f"/sessions/{victim}/events"),
            "metrics": req("GET", "/metrics"),
            "openapi": req("GET", "/openapi.json"),
            "docs": req("GET", "/docs"),
        }
        only = cfg.get("routes")  # a subset (the test's control run outside the sandbox)
        for route, data in routes.items():
            if only is not None and route not in only:
                continue
            outcome = attempt(data, host, port, via_proxy)
            results.append({"host": host, "proxy": via_proxy, "route": route, "outcome": outcome})
        if only is not None and "websocket /acp" not in only:
            continue
        outcome = attempt(ws_handshake("/acp", hdr), host, port, via_proxy, ws_after=ws_payload)
        results.append({"host": host, "proxy": via_proxy, "route": "websocket /acp", "outcome": outcome})
    # Whole or not at all: the test polls for the file and would read a half-written one.
    with open(f"probe-{label}.json.part", "w") as f:
        json.dump({"label": label, "sockets": sockets, "results": results}, f)
    os.replace(f"probe-{label}.json.part", f"probe-{label}.json")
    print(f"probe {label}: {len(results)} attempts")


if __name__ == "__main__":
    main()

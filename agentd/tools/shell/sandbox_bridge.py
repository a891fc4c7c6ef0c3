"""Runs inside the sandbox (stdlib only, `python -I -S`): offers agentd's egress proxy,
a Unix socket bind-mounted in, as `127.0.0.1:<port>` of the sandbox's own network
namespace, where tools' `HTTP_PROXY` can name it. Argv: socket path, port.

It says `ready` on stdout once listening (the sandbox's shell waits for that before
running the command), then forwards each connection both ways until either side ends.
It dies with the sandbox (its pid namespace ends with the command).
"""

import os
import socket
import sys
import threading


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def _serve(client: socket.socket, path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        upstream.close()
        return
    back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
    back.start()
    _pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def main() -> None:
    path, port = sys.argv[1], int(sys.argv[2])
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", port))
    server.listen(64)
    os.write(1, b"ready\n")
    os.close(1)
    while True:
        client, _ = server.accept()
        threading.Thread(target=_serve, args=(client, path), daemon=True).start()


if __name__ == "__main__":
    main()

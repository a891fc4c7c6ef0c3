"""A self-signed certificate for 127.0.0.1 and localhost (openssl), for fake servers that
speak https, and the client context that trusts it."""

from __future__ import annotations

import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SelfSigned:
    cert: str
    key: str

    def client_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=self.cert)


def self_signed(folder: Path) -> SelfSigned:
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost",
            "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
        timeout=30,
    )  # fmt: skip
    return SelfSigned(str(cert), str(key))

"""Stop hooks as real command scripts (a Python file the hook runs), and the bodies that
print their verdicts."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any


class CommandHook:
    """A Python stop hook script: logs its stdin payload (one JSON line per call), then runs
    `body`, which sees `payload` and prints the verdict."""

    def __init__(self, tmp_path: Path, name: str, body: str, *, timeout: float | None = None) -> None:
        self.log = tmp_path / f"{name}.log"
        self.script = tmp_path / f"{name}.py"
        self.timeout = timeout
        self.script.write_text(
            "import json, sys, time\n"
            "payload = json.load(sys.stdin)\n"
            f"with open({str(self.log)!r}, 'a') as f:\n"
            "    f.write(json.dumps(payload) + '\\n')\n"
            "    f.flush()\n" + body + "\n"
        )

    @property
    def command(self) -> str:
        return f"{shlex.quote(sys.executable)} {shlex.quote(str(self.script))}"

    def calls(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]


def answer(verdict: dict[str, Any]) -> str:
    """Hook body: always print `verdict`."""
    return f"print(json.dumps({verdict!r}))"


def block_first(verdict: dict[str, Any]) -> str:
    """Hook body: print `verdict` when first asked in a turn (reentries 0), then allow."""
    return (
        f"verdict = {verdict!r} if payload['reentries'] == 0 else {{'decision': 'allow'}}\n"
        "print(json.dumps(verdict))"
    )

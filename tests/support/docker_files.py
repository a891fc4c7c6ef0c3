"""The Dockerfile and docker-compose.yml read as data (no container engine needed)."""

from __future__ import annotations

import re
import shlex
from typing import Any

import yaml

from tests.support.paths import REPO_ROOT

ROOT = REPO_ROOT


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in (ROOT / "Dockerfile").read_text().splitlines():
        line = raw.strip()
        if line.startswith("#") or not line:
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        keyword, _, args = line.partition(" ")
        out.append((keyword.upper(), args.strip()))
    return out


def final_stage() -> list[tuple[str, str]]:
    steps = instructions()
    last_from = max(i for i, (k, _) in enumerate(steps) if k == "FROM")
    return steps[last_from:]


def env_of(steps: list[tuple[str, str]]) -> dict[str, str]:
    env: dict[str, str] = {}
    for keyword, args in steps:
        if keyword == "ENV":
            env.update(part.split("=", 1) for part in shlex.split(args))  # type: ignore[arg-type]
    return env


def compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def mount_target(volume: str) -> str:
    """`source:target[:mode]` → target; the source may hold `${VAR:-default}`."""
    return re.split(r":(?=/)", volume)[1].split(":")[0]

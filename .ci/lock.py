"""The dependency locks, generated from pyproject.toml's ranges (which stay `>=` floors for
anyone embedding agentd): every package pinned, with the hashes of all its files, for
Python 3.11 on Linux.

- `requirements.lock` — the server's dependencies: what the Dockerfile installs;
- `requirements-dev.lock` — plus the `dev` extra: what CI (`.ci/run`) installs.

    python .ci/lock.py            # regenerate both (needs uv — `pip install uv` — and the index)
    python .ci/lock.py --upgrade  # the same, every pin moved to the newest release allowed
    python .ci/lock.py --check    # offline, for CI: fails when pyproject.toml moved on

Each lock records the SHA-256 of the inputs it was made from (`requires-python`,
`dependencies` and, for the dev lock, the `dev` extra). `--check` recomputes it, and also
checks that every direct dependency is pinned at a version its range allows (a hand edit).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STAMP = "# pyproject-inputs-sha256: "
LOCKS = {"requirements.lock": (), "requirements-dev.lock": ("dev",)}  # file → extras
UV_ARGS = ["pip", "compile", "pyproject.toml", "--python-version", "3.11", "--python-platform", "linux"]
UV_ARGS += ["--generate-hashes", "--quiet"]


def inputs(project: dict[str, object], extras: tuple[str, ...]) -> list[str]:
    """The requirement strings a lock is made from, in a fixed order."""
    optional = project.get("optional-dependencies", {})
    assert isinstance(optional, dict)
    reqs = [str(r) for r in project.get("dependencies", [])]  # type: ignore[attr-defined]
    for extra in extras:
        reqs += [f"{r} ; extra {extra}" for r in optional.get(extra, [])]
    return [f"python {project.get('requires-python', '')}", *reqs]


def digest(root: Path, extras: tuple[str, ...]) -> str:
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    return hashlib.sha256(json.dumps(inputs(project, extras)).encode()).hexdigest()


def generate(root: Path, *, upgrade: bool) -> None:
    """uv keeps the versions already in a lock unless they no longer fit (or `upgrade`)."""
    uv = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
    for name, extras in LOCKS.items():
        args = [uv, *UV_ARGS, *(a for e in extras for a in ("--extra", e)), "-o", name]
        args += ["--upgrade"] if upgrade else []
        subprocess.run(args, cwd=root, check=True)
        path = root / name
        text = path.read_text()
        path.write_text(f"{STAMP}{digest(root, extras)}\n{text}")
        print(f"wrote {name}")


def pins(text: str) -> dict[str, str]:
    """`name==version` lines of a lock, names normalised (PEP 503)."""
    found = {}
    for match in re.finditer(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)", text, re.M):
        found[re.sub(r"[-_.]+", "-", match[1]).lower()] = match[2]
    return found


def check(root: Path) -> list[str]:
    """What is wrong with the locks in `root` (empty: they are current)."""
    problems = []
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    for name, extras in LOCKS.items():
        path = root / name
        if not path.exists():
            problems.append(f"{name} is missing")
            continue
        text = path.read_text()
        stamp = next((line[len(STAMP) :] for line in text.splitlines() if line.startswith(STAMP)), None)
        if stamp != digest(root, extras):
            problems.append(f"{name} was made from other dependencies than pyproject.toml's now")
        problems += [f"{name}: {p}" for p in _out_of_range(project, extras, pins(text))]
    return problems


def _out_of_range(project: dict[str, object], extras: tuple[str, ...], pinned: dict[str, str]) -> list[str]:
    try:  # pip's own copy when packaging is not installed (a fresh venv)
        from packaging.requirements import Requirement
    except ImportError:
        from pip._vendor.packaging.requirements import Requirement

    out = []
    for line in inputs(project, extras)[1:]:
        req = Requirement(line.split(" ; extra ")[0])
        if req.marker is not None and not req.marker.evaluate({"sys_platform": "linux"}):
            continue
        version = pinned.get(re.sub(r"[-_.]+", "-", req.name).lower())
        if version is None:
            out.append(f"{req.name} is not pinned")
        elif not req.specifier.contains(version, prereleases=True):
            out.append(f"{req.name}=={version} is outside {req.specifier}")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="offline: are the locks current?")
    parser.add_argument("--upgrade", action="store_true", help="move every pin to the newest allowed")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout (default: this one)")
    args = parser.parse_args()
    if not args.check:
        generate(args.root, upgrade=args.upgrade)
        return 0
    problems = check(args.root)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print("regenerate the locks: python .ci/lock.py (README: Development)", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

"""Start-up cost of `agentd serve`, `agentd acp` and `agentd --help`, each side by side with
its floor (prints figures and ratios; no asserts).

    .venv/bin/python bench/startup.py [--runs 6] [--top 15] [--smoke] [--base TREE]

Every round runs each contender once, in turn (interleaved: a load change on this shared
host hits all of them alike); the ratios are of medians (issue 32, item 2):

- start → /healthz: `agentd serve` (scripted provider, SQLite) vs a minimal uvicorn app that
  imports fastapi, sqlalchemy and pydantic-settings and answers `/healthz` (the floor of a
  server built on these libraries); the first agentd run creates the database (migrations
  run) and is reported apart, the others start on the existing one;
- idle RSS once healthy: the minimal app, agentd with the scripted provider, and agentd
  configured for a real provider (OpenAI-compatible, Anthropic; a key and a local base URL
  that is never called: idle means no model call yet) (item 3);
- `agentd acp` → an answered `initialize` on stdio vs a bare
  `python -c "import fastapi, sqlalchemy, pydantic"`;
- `agentd --help` vs `python -c "import typer"` (the help is Typer's);
- with `--base TREE` (another checkout, e.g. a `git worktree` of main), its `agentd serve`
  and `agentd acp` run in the same rounds too: before/after ratios measured side by side;
- import time: the heaviest modules of `import agentd.cli, agentd.app, agentd.serve` and of
  `agentd --help` under `python -X importtime` (cumulative µs), and whether `mcp` /
  `alembic` load at all.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LAZY = ("mcp", "alembic")  # modules a request may never need
# The floor of a server on agentd's libraries: what importing them and serving one route costs.
MINIMAL_APP = """
import sys
import fastapi, sqlalchemy, pydantic_settings, uvicorn

app = fastapi.FastAPI()


@app.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
"""
BARE_IMPORT = "import fastapi, sqlalchemy, pydantic"
INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
# Idle with a real provider configured: a key and a base URL no request reaches while idle.
PROVIDERS: dict[str, dict[str, str]] = {
    "scripted": {"AGENTD_PROVIDER": "scripted"},
    "openai": {"AGENTD_PROVIDER": "openai", "AGENTD_OPENAI_API_KEY": "sk-bench",
               "AGENTD_OPENAI_BASE_URL": "http://127.0.0.1:9/v1"},
    "anthropic": {"AGENTD_PROVIDER": "anthropic", "AGENTD_ANTHROPIC_API_KEY": "sk-ant-bench",
                  "AGENTD_ANTHROPIC_BASE_URL": "http://127.0.0.1:9"},
}  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def env_for(home: Path, port: int, provider: str = "scripted", tree: Path = ROOT) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    env.update(
        HOME=str(home),
        AGENTD_HOME=str(home / "agentd"),
        AGENTD_PORT=str(port),
        PYTHONPATH=str(tree) + os.pathsep + env.get("PYTHONPATH", ""),
        **PROVIDERS[provider],
    )
    return env


def agentd_serve(port: int) -> list[str]:
    return [sys.executable, "-c", "from agentd.cli import main; main()", "serve", "--log-level", "warning"]


def minimal_app(port: int) -> list[str]:
    return [sys.executable, "-c", MINIMAL_APP, str(port)]


def one_start(
    home: Path, settle_s: float, provider: str = "scripted", *, minimal: bool = False, tree: Path = ROOT
) -> tuple[float, float, float]:
    """(seconds from spawn to /healthz 200, to /readyz 200, idle RSS in MiB) of `agentd serve`
    (of `tree`), or of the minimal app (ready when healthy). Idle RSS is read once ready."""
    port = free_port()
    cmd = minimal_app(port) if minimal else agentd_serve(port)
    started = time.perf_counter()
    env = env_for(home, port, provider, tree)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tree)
    try:
        url = f"http://127.0.0.1:{port}/healthz"
        while True:
            if proc.poll() is not None:
                err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                raise SystemExit(f"{cmd[-1]} exited with {proc.returncode}:\n{err[-2000:]}")
            try:
                with urllib.request.urlopen(url, timeout=5) as resp:
                    if resp.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.perf_counter() - started > 60:
                raise SystemExit("agentd serve never became healthy")
            time.sleep(0.005)
        elapsed = time.perf_counter() - started
        if not minimal:
            wait_ready(f"http://127.0.0.1:{port}/readyz", proc)
        ready = time.perf_counter() - started
        time.sleep(settle_s)  # idle: let start-up garbage settle before reading RSS
        return elapsed, ready, rss_mib(proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_ready(url: str, proc: subprocess.Popen[Any]) -> None:
    """Until `url` answers 200: agentd answers /healthz while its app still loads."""
    deadline = time.perf_counter() + 60
    while time.perf_counter() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.01)
    raise SystemExit(f"{url} never answered 200")


def one_acp(home: Path, tree: Path = ROOT) -> float:
    """Seconds from spawning `agentd acp` (of `tree`) to its answer to `initialize` on stdout."""
    env = env_for(home, free_port(), tree=tree)
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentd.cli", "acp"], env=env, cwd=tree,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(INITIALIZE.encode() + b"\n")
        proc.stdin.flush()
        line = proc.stdout.readline()  # the answer, or b"" when it died (then: no figure)
        elapsed = time.perf_counter() - started
        if not line or json.loads(line).get("id") != 1:
            raise SystemExit(f"agentd acp did not answer initialize: {line[:300]!r}")
        return elapsed
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def one_run(cmd: list[str], home: Path) -> float:
    """Seconds a command takes from spawn to exit (its output discarded)."""
    started = time.perf_counter()
    subprocess.run(
        cmd, env=env_for(home, free_port()), cwd=ROOT, capture_output=True, check=True, timeout=120
    )
    return time.perf_counter() - started


def import_times(
    top: int, code: str = "import agentd.cli, agentd.app, agentd.serve", root: str = "agentd.app"
) -> None:
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True,
    )  # fmt: skip
    rows: list[tuple[int, int, str]] = []
    for line in out.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        self_us, cum_us, name = line.removeprefix("import time:").split("|")
        rows.append((int(cum_us), int(self_us), name.rstrip()))
    loaded = {name.strip() for _, _, name in rows}
    # The top-level imports (one space after the bar; each level below indents two more).
    total = sum(cum for cum, _, name in rows if not name.startswith("  "))
    at_root = max((cum for cum, _, name in rows if name.strip() == root), default=0)
    print(f"{code!r} (-X importtime): {total / 1000:.0f} ms in all, {root} {at_root / 1000:.0f} ms")
    print(f"top {top} imports by cumulative time (µs, self µs, module):")
    for cum, self_us, name in sorted(rows, reverse=True)[:top]:
        print(f"  {cum:>9} {self_us:>8}  {name}")
    for mod in LAZY:
        print(f"imports {mod}: {'yes' if mod in loaded else 'no'}")


def serve_import_split(home: Path, top: int) -> None:
    """`agentd serve` under `-X importtime`, its imports split at the moment it serves
    (uvicorn's "Application startup complete": from then on /healthz answers) — what it
    loads before serving, and what its app loads after, behind /readyz — grouped by
    package (self µs: a module a lazy face loads through `importlib` is not listed on its
    own, its self time goes to the importer)."""
    port = free_port()
    cmd = [sys.executable, "-X", "importtime", "-m", "agentd.cli", "serve"]
    proc = subprocess.Popen(
        cmd, env=env_for(home, port), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_ready(f"http://127.0.0.1:{port}/readyz", proc)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    phases: dict[str, dict[str, int]] = {"before serving": {}, "after (the app)": {}}
    phase = "before serving"
    for line in err.splitlines():
        if "Application startup complete" in line:
            phase = "after (the app)"
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        self_us, _, name = line.removeprefix("import time:").split("|")
        parts = name.strip().split(".")
        group = ".".join(parts[:2]) if parts[0] in ("agentd", "sqlalchemy", "fastapi") else parts[0]
        phases[phase][group] = phases[phase].get(group, 0) + int(self_us)
    for what, groups in phases.items():
        print(f"agentd serve imports {what}: {sum(groups.values()) / 1000:.0f} ms (self), by package:")
        for group, us in sorted(groups.items(), key=lambda kv: -kv[1])[:top]:
            print(f"  {us / 1000:7.1f} ms  {group}")


def median_ms(xs: list[float]) -> float:
    return statistics.median(xs) * 1000


def ratio_line(what: str, ours: list[float], floor: list[float], target: float) -> None:
    r = statistics.median(ours) / statistics.median(floor)
    print(f"{what}: agentd {median_ms(ours):.0f} ms vs floor {median_ms(floor):.0f} ms = {r:.2f}x "
          f"(target <= {target}x)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--runs", type=int, default=6, help="rounds (the first agentd start on a fresh database)"
    )
    parser.add_argument("--top", type=int, default=15, help="import-time entries to print")
    parser.add_argument("--settle", type=float, default=1.0, help="idle seconds before reading RSS")
    parser.add_argument("--smoke", action="store_true", help="a tiny quick run (CI)")
    parser.add_argument("--base", type=Path, help="another checkout to run side by side (before/after)")
    args = parser.parse_args()
    if args.smoke:
        args.runs, args.top, args.settle = 2, 5, 0.2
    home = Path(tempfile.mkdtemp(prefix="agentd-startup-"))
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f}, "
        f"{args.runs} rounds"
    )
    first, _, first_rss = one_start(home, args.settle)  # creates the database: migrations run
    print(f"start -> /healthz (fresh database, migrations run): {first * 1000:.0f} ms; "
          f"then idle RSS {first_rss:.1f} MiB (a server keeps what its start-up imported)")  # fmt: skip
    if args.base is not None:  # the same on a fresh home of its own
        with tempfile.TemporaryDirectory(prefix="agentd-startup-base-") as fresh:
            _, _, base_first_rss = one_start(Path(fresh), args.settle, tree=args.base)
        print(f"  base, fresh database: idle RSS {base_first_rss:.1f} MiB")
    serve: list[float] = []
    ready: list[float] = []
    floor: list[float] = []
    rss: dict[str, list[float]] = {"minimal app": [], **{p: [] for p in PROVIDERS}}
    acp: list[float] = []
    # --base: the other tree's serve (healthy = ready there, before this change), RSS, acp.
    base_serve: list[float] = []
    base_ready: list[float] = []
    base_rss: dict[str, list[float]] = {p: [] for p in PROVIDERS}
    base_acp: list[float] = []
    bare: list[float] = []
    helps: list[float] = []
    typer_only: list[float] = []
    for i in range(args.runs):
        t, _, r = one_start(home, args.settle, minimal=True)
        floor.append(t)
        rss["minimal app"].append(r)
        for provider in PROVIDERS:
            t, ok, r = one_start(home, args.settle, provider)
            rss[provider].append(r)
            if provider == "scripted":
                serve.append(t)
                ready.append(ok)
            if args.base is not None:
                t, ok, r = one_start(home, args.settle, provider, tree=args.base)
                base_rss[provider].append(r)
                if provider == "scripted":
                    base_serve.append(t)
                    base_ready.append(ok)
        acp.append(one_acp(home))
        if args.base is not None:
            base_acp.append(one_acp(home, args.base))
        bare.append(one_run([sys.executable, "-c", BARE_IMPORT], home))
        helps.append(one_run([sys.executable, "-m", "agentd.cli", "--help"], home))
        typer_only.append(one_run([sys.executable, "-c", "import typer"], home))
        print(f"  round {i + 1}: serve {serve[-1] * 1000:.0f} / minimal app {floor[-1] * 1000:.0f} ms; "
              f"acp initialize {acp[-1] * 1000:.0f} / bare import {bare[-1] * 1000:.0f} ms; "
              f"--help {helps[-1] * 1000:.0f} / import typer {typer_only[-1] * 1000:.0f} ms")  # fmt: skip
    ratio_line("start -> /healthz (existing database)", serve, floor, 1.2)
    ratio_line("start -> /readyz 200 (the app loaded and started)", ready, floor, 1.2)
    ratio_line("agentd acp -> initialize answered, vs import fastapi, sqlalchemy, pydantic", acp, bare, 1.3)
    ratio_line("agentd --help, vs import typer", helps, typer_only, 1.0)
    base = statistics.median(rss["minimal app"])
    for name, values in rss.items():
        vs = "" if name == "minimal app" else f" = {statistics.median(values) / base:.2f}x the minimal app"
        print(f"idle RSS {name}: median {statistics.median(values):.1f} MiB, max {max(values):.1f} MiB{vs}"
              + ("" if not vs else " (target <= 1.1x)"))  # fmt: skip
    if args.base is not None:
        print(f"--base {args.base}, same rounds:")
        ratio_line("  base start -> /healthz", base_serve, floor, 1.2)
        ratio_line("  base start -> /readyz", base_ready, floor, 1.2)
        ratio_line("  base agentd acp -> initialize", base_acp, bare, 1.3)
        for name, values in base_rss.items():
            print(f"  base idle RSS {name}: median {statistics.median(values):.1f} MiB = "
                  f"{statistics.median(values) / base:.2f}x the minimal app")  # fmt: skip
    serve_import_split(home, args.top)
    import_times(args.top)
    import_times(args.top, "import sys; sys.argv = ['agentd', '--help']\nfrom agentd.cli import main\n"
                 "try: main()\nexcept SystemExit: pass", "agentd.cli")  # fmt: skip


if __name__ == "__main__":
    main()

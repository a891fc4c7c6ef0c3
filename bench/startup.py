"""Start-up cost of `agentd serve` (prints figures; no asserts).

    .venv/bin/python bench/startup.py [--runs 5] [--top 15] [--smoke]

- start → /healthz: wall time from spawning `agentd serve` (scripted provider, SQLite)
  until `/healthz` answers 200; the first run creates the database (migrations run), the
  others start on the existing one (the schema is current);
- idle RSS: the server's resident memory once healthy and idle;
- import time: the heaviest modules of `import agentd.cli, agentd.app, agentd.serve`
  under `python -X importtime` (cumulative µs), and whether `mcp` / `alembic` load at all.
"""

from __future__ import annotations

import argparse
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

ROOT = Path(__file__).resolve().parents[1]
LAZY = ("mcp", "alembic")  # modules a request may never need


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def env_for(home: Path, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    env.update(
        HOME=str(home),
        AGENTD_HOME=str(home / "agentd"),
        AGENTD_PORT=str(port),
        AGENTD_PROVIDER="scripted",
        PYTHONPATH=str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
    )
    return env


def one_start(home: Path, settle_s: float) -> tuple[float, float]:
    """(seconds from spawn to /healthz 200, idle RSS in MiB)."""
    port = free_port()
    cmd = [sys.executable, "-c", "from agentd.cli import main; main()", "serve", "--log-level", "warning"]
    started = time.perf_counter()
    proc = subprocess.Popen(
        cmd, env=env_for(home, port), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT
    )
    try:
        url = f"http://127.0.0.1:{port}/healthz"
        while True:
            if proc.poll() is not None:
                err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                raise SystemExit(f"agentd serve exited with {proc.returncode}:\n{err[-2000:]}")
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
        time.sleep(settle_s)  # idle: let start-up garbage settle before reading RSS
        return elapsed, rss_mib(proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def import_times(top: int) -> None:
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import agentd.cli, agentd.app, agentd.serve"],
        capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True,
    )  # fmt: skip
    rows: list[tuple[int, int, str]] = []
    for line in out.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        self_us, cum_us, name = line.removeprefix("import time:").split("|")
        rows.append((int(cum_us), int(self_us), name.rstrip()))
    loaded = {name.strip() for _, _, name in rows}
    total = max((cum for cum, _, name in rows if name.strip() == "agentd.app"), default=0)
    print(f"import agentd.app (cumulative, -X importtime): {total / 1000:.0f} ms")
    print(f"top {top} imports by cumulative time (µs, self µs, module):")
    for cum, self_us, name in sorted(rows, reverse=True)[:top]:
        print(f"  {cum:>9} {self_us:>8}  {name}")
    for mod in LAZY:
        print(f"imports {mod}: {'yes' if mod in loaded else 'no'}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=6, help="starts (the first on a fresh database)")
    parser.add_argument("--top", type=int, default=15, help="import-time entries to print")
    parser.add_argument("--settle", type=float, default=1.0, help="idle seconds before reading RSS")
    parser.add_argument("--smoke", action="store_true", help="a tiny quick run (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.runs, args.top, args.settle = 2, 5, 0.2
    home = Path(tempfile.mkdtemp(prefix="agentd-startup-"))
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, {args.runs} starts")
    times: list[float] = []
    rss: list[float] = []
    for i in range(args.runs):
        t, r = one_start(home, args.settle)
        times.append(t)
        rss.append(r)
        print(f"  start {i + 1}: {t * 1000:.0f} ms to /healthz, idle RSS {r:.1f} MiB"
              + ("  (fresh database)" if i == 0 else ""))  # fmt: skip
    warm = times[1:] or times
    print(f"start -> /healthz (fresh database): {times[0] * 1000:.0f} ms")
    print(f"start -> /healthz (existing database): median {statistics.median(warm) * 1000:.0f} ms, "
          f"min {min(warm) * 1000:.0f} ms, max {max(warm) * 1000:.0f} ms")  # fmt: skip
    print(f"idle RSS: median {statistics.median(rss):.1f} MiB, max {max(rss):.1f} MiB")
    import_times(args.top)


if __name__ == "__main__":
    main()

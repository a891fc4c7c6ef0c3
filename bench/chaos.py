"""Fault injection against three real replicas (issue 26 item 8; prints figures, no asserts).

    .venv/bin/python bench/chaos.py [--minutes 5] [--sessions 10] [--lease-ttl 5]
                                    [--faults kill9,pg_all,sigstop,pg_listen,redis,pg_storm]
                                    [--fault-gap 5] [--redis-url redis://127.0.0.1:6379/0]
                                    [--redis-restart]

The driver of tests/support/chaos.py (the CI short mode is tests/e2e/chaos/, about a minute):
three `agentd serve` replicas on one fresh Postgres database, `--sessions` sessions spread
over them, on every replica a watcher per session recording every frame, a prompter per
session enqueuing with `requestId`s through random live replicas (retrying under the same
id until acked), and the fault schedule cycled for `--minutes`: `kill -9` (restarted with
the same id after TTL + 1 s), SIGSTOP for TTL + 0.5 s, `pg_terminate_backend` of the
database's backends (all / LISTEN only / a storm of six), Redis (its agentd connections
killed with CLIENT KILL — or with `--redis-restart`, Redis itself restarted: every user of
this machine's Redis loses its connections, so not while others run tests). Then the
cluster is healed and left to quiesce, and the invariants are counted: acked prompts lost,
double runs, log gaps, duplicate / divergent seqs, stranded clients, takeover times.

Needs Postgres at 127.0.0.1:5432 (tests/conftest.py); Redis only for `--redis-url`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.chaos import FAULTS, ChaosConfig, run_chaos


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=5.0)
    ap.add_argument("--sessions", type=int, default=10)
    ap.add_argument("--lease-ttl", type=float, default=5.0)
    ap.add_argument("--faults", default=",".join(FAULTS))
    ap.add_argument("--fault-gap", type=float, default=5.0)
    ap.add_argument("--prompt-every", type=float, default=1.0)
    ap.add_argument("--redis-url", default=None)
    ap.add_argument("--redis-restart", action="store_true")
    ap.add_argument("--seed", type=int, default=26)
    args = ap.parse_args()
    config = ChaosConfig(
        sessions=args.sessions,
        seconds=args.minutes * 60,
        ttl_s=args.lease_ttl,
        faults=tuple(f for f in args.faults.split(",") if f),
        fault_gap_s=args.fault_gap,
        prompt_every_s=args.prompt_every,
        redis_url=args.redis_url,
        redis_restart=args.redis_restart,
        seed=args.seed,
        quiesce_s=max(45.0, 6 * args.lease_ttl),
    )
    with tempfile.TemporaryDirectory(prefix="agentd-chaos-") as tmp:
        report = asyncio.run(run_chaos(Path(tmp), config))
    print(f"chaos: {args.minutes} min, {args.sessions} sessions, 3 replicas, TTL {args.lease_ttl} s")
    for line in report.lines():
        print(line)
    for fault in report.seq_faults[:20]:
        print(f"  seq fault: {fault.client} seq {fault.seq} {fault.kind.value} {fault.detail[:160]}")
    for s in report.stranded[:20]:
        print(f"  stranded: {s.client} seq {s.seq} delay {s.delay}")
    for t in report.takeovers:
        print(f"  takeover: {t.session_id} after {t.fault.kind} of {t.fault.replica}: {t.seconds}")


if __name__ == "__main__":
    main()

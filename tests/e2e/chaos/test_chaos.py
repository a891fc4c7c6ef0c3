"""The chaos suite's CI short mode (issue 26 item 8): three real replicas on one Postgres,
three sessions, a watcher per session on every replica, a prompter enqueuing with
`requestId`s, and every fault once — `kill -9` (+ restart), SIGSTOP past the lease
(+ SIGCONT), `pg_terminate_backend` of all backends / the LISTEN ones / a storm, agentd's
Redis connections killed — under a 2 s lease (tests/support/chaos.py). The run happens
once per module (about two minutes); each invariant is its own test over its report, so
one broken promise does not hide the others. `bench/chaos.py --minutes N` is the long run."""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import socket
from collections.abc import Iterator

import pytest

from tests.support.chaos import FAULTS, ChaosConfig, ChaosReport, run_chaos

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(280)]

REDIS = ("127.0.0.1", 6379)


def redis_url() -> str | None:
    """Redis on this machine, if it runs (agentd's connections to it are what gets cut)."""
    try:
        socket.create_connection(REDIS, timeout=1).close()
    except OSError:
        return None
    return f"redis://{REDIS[0]}:{REDIS[1]}/0"


# One pass over the faults (seconds=0: each kind once), a 2 s lease.
SHORT = ChaosConfig(sessions=3, seconds=0.0, ttl_s=2.0, fault_gap_s=4.0, quiesce_s=20.0)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChaosReport]:
    tmp = tmp_path_factory.mktemp("chaos")
    config = dataclasses.replace(SHORT, redis_url=redis_url())
    # Its own thread and event loop: one run shared by the module's tests.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        yield pool.submit(asyncio.run, run_chaos(tmp, config)).result()


def summary(report: ChaosReport) -> str:
    return "\n".join(report.lines())


def test_every_fault_was_injected_and_took_effect(report: ChaosReport) -> None:
    kinds = [kind for _, kind, _, _ in report.faults]
    assert set(kinds) == set(FAULTS), summary(report)
    for _, kind, _, outcome in report.faults:
        if kind.startswith("pg_"):
            assert not outcome.startswith("0 "), summary(report)  # a backend was terminated
    assert report.acked and report.events, summary(report)  # traffic went on around them


def test_no_acknowledged_prompt_is_lost(report: ChaosReport) -> None:
    assert report.lost == [], summary(report)


def test_no_prompt_runs_twice(report: ChaosReport) -> None:
    assert report.doubles == {}, summary(report)


def test_the_log_has_no_gap(report: ChaosReport) -> None:
    assert report.gaps == [], summary(report)


def test_each_client_gets_each_seq_once_in_one_form_in_order(report: ChaosReport) -> None:
    assert report.seq_faults == [], summary(report) + "\n" + "\n".join(map(str, report.seq_faults[:10]))


def test_no_client_is_stranded(report: ChaosReport) -> None:
    assert not report.stranded_clients, summary(report) + "\n" + "\n".join(map(str, report.stranded[:10]))


def test_every_replica_listens_again_after_its_connections_are_cut(report: ChaosReport) -> None:
    assert report.listening == 3, summary(report)


def test_every_queue_drains_once_the_faults_stop(report: ChaosReport) -> None:
    assert report.undrained == [], summary(report)


def test_a_killed_replicas_sessions_resume_within_ttl_plus_sweep_plus_2s(report: ChaosReport) -> None:
    killed = [t for t in report.takeovers if t.fault.kind == "kill9"]
    assert killed, summary(report)  # the killed replica owned sessions
    late = [t for t in killed if t.seconds is None or t.seconds > SHORT.takeover_bound_s]
    assert late == [], summary(report)

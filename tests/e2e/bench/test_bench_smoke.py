"""CI runs each issue-14 benchmark once in its short smoke mode: the script exits 0 and
prints its figure lines (the figures themselves are not judged — timing is no test).
Two files (this one and test_bench_smoke_load.py), so that the two xdist workers
(`--dist loadfile`) share the benchmarks' minutes."""

from __future__ import annotations

import re

from tests.support.bench_smoke import run_smoke as _run


def test_commit_bench_smoke_prints_rate_and_p99_per_session_count() -> None:
    out = _run("commit.py")
    for sessions in (1, 4):
        line = rf"^sqlite +sessions={sessions} +window=4 +events/s= *\d+ .*commit p50=[\d.]+ ms p99=[\d.]+ ms"
        assert re.search(line, out, re.M), out
    # Postgres runs too when it is reachable (the store tests need it anyway).
    assert re.search(r"^postgres +sessions=4 |^postgres skipped", out, re.M), out


def test_startup_bench_smoke_prints_healthz_time_rss_and_import_breakdown() -> None:
    out = _run("startup.py")
    ratio = r"agentd \d+ ms vs floor \d+ ms = [\d.]+x"
    assert re.search(rf"^start -> /healthz \(existing database\): {ratio}", out, re.M), out
    assert re.search(rf"^start -> /readyz 200 \(the app loaded and started\): {ratio}", out, re.M), out
    assert re.search(rf"^agentd acp -> initialize answered, .*: {ratio}", out, re.M), out
    assert re.search(rf"^agentd --help, vs import typer: {ratio}", out, re.M), out
    for provider in ("scripted", "openai", "anthropic"):
        rss = rf"^idle RSS {provider}: median [\d.]+ MiB.* = [\d.]+x the minimal app"
        assert re.search(rss, out, re.M), out
    imports = r"^'import agentd.cli, agentd.app, agentd.serve' \(-X importtime\): \d+ ms"
    assert re.search(imports, out, re.M), out
    assert "imports mcp: no" in out and "imports alembic: no" in out, out


def test_turn_bench_smoke_prints_cpu_latency_and_server_added_time_per_turn_kind() -> None:
    out = _run("turn.py")
    assert re.search(r"^fake model alone: p50=[\d.]+ ms p99=[\d.]+ ms", out, re.M), out
    for kind in ("trivial ", "one-tool"):
        line = (
            rf"^sqlite +{kind} turns=6 cpu/turn=[\d.]+ ms.* p50=[\d.]+ ms p99=[\d.]+ ms "
            r"server-added p50=-?[\d.]+ ms"
        )
        assert re.search(line, out, re.M), out
    assert re.search(r"^postgres +trivial +turns=6 |^postgres skipped", out, re.M), out


def test_memory_bench_smoke_prints_list_attach_latency_and_rss_per_session() -> None:
    out = _run("memory.py")
    for what in ("session/list first page", "session/list cwd paging", "attach cold \\(afterSeq 0\\)"):
        assert re.search(rf"^sqlite +{what} +n=\d+ +p50= *[\d.]+ ms p99= *[\d.]+ ms", out, re.M), out
    assert re.search(r"^sqlite +RSS per idle loaded stored session: -?[\d.]+ KiB", out, re.M), out
    assert re.search(r"^sqlite +RSS per loaded 3-turn session: -?[\d.]+ KiB", out, re.M), out
    assert re.search(r"^sqlite +disk per stored 3-turn session: [\d.]+ KiB", out, re.M), out
    assert re.search(r"^postgres +session/list first page |^postgres skipped", out, re.M), out


def test_replicas_bench_smoke_prints_rates_per_replica_count_and_the_takeover() -> None:
    out = _run("replicas.py")
    if re.search(r"^postgres skipped", out, re.M):
        return  # replicas share a Postgres database: nothing to run without one
    for n in (1, 2):
        line = rf"^replicas={n} sessions=4 turns=8 events=\d+ events/s=\d+ turns/s=[\d.]+ .*errors=0$"
        assert re.search(line, out, re.M), out
    # Commands and events cross replicas: both figures are measured. An event may reach the
    # non-owner's client first (both are woken by the same commit), so a lag can be negative.
    figure = r"p50=-?[\d.]+ ms p99=-?[\d.]+ ms"
    assert re.search(rf"^replicas=2 cross-replica event latency: {figure}$", out, re.M), out
    side = r"p50=[\d.]+ p99=[\d.]+ ms errors=\d+"
    for clients in (1, 20):  # routed and direct side by side, with their ratio
        routed = (
            rf"^replicas=2 routed vs direct: clients={clients} direct {side} \| routed {side}"
            r" \| routed/direct p50 = [\d.]+$"
        )
        assert re.search(routed, out, re.M), out
    takeover = (
        r"^replicas=2 takeover after kill -9: a prompt on another replica answered after "
        r"[\d.]+ s \(end_turn"
    )
    assert re.search(takeover, out, re.M), out


def test_mcp_start_bench_smoke_prints_session_new_times_and_the_ratio() -> None:
    out = _run("mcp_start.py")
    for label in ("1 server", "3 servers", "3 servers \\+ 1 hanging"):
        assert re.search(rf"^session/new {label} +median +\d+ ms", out, re.M), out
    assert re.search(r"^3 servers / 1 server: [\d.]+x", out, re.M), out

"""The smoke runs of the benchmarks that drive turns and fan-out (the other half of
test_bench_smoke.py, split so that the two xdist workers share them)."""

from __future__ import annotations

import re

from tests.support.bench_smoke import run_smoke as _run


def test_concurrency_bench_smoke_prints_latency_rate_and_errors() -> None:
    out = _run("concurrency.py")
    line = r"^sqlite +sessions=8 +turns=\d+ p50=[\d.]+ ms.* p99=[\d.]+ ms turns/s=\d+ .*errors=0 "
    assert re.search(line, out, re.M), out
    assert re.search(r"^postgres +sessions=8 |^postgres skipped", out, re.M), out


def test_turn_profile_smoke_prints_cpu_sniffio_calls_and_top_functions() -> None:
    out = _run("profile_turn.py")
    assert re.search(r"^turns=5 sessions=1 sniffio=installed server CPU/turn=[\d.]+ ms", out, re.M), out
    assert re.search(r"^httpcore current_async_library: [\d.]+ calls/turn", out, re.M), out
    assert len(re.findall(r"^ +\d+ µs +[\d.]+ % ", out, re.M)) >= 10, out


def test_fanout_bench_smoke_prints_rate_spread_cpu_and_no_lost_frames() -> None:
    out = _run("fanout.py")
    for clients in (1, 3):
        # agentd, then the bare broadcast of the same frames to as many clients, then the ratio
        for who in ("sqlite", "floor"):
            line = (
                rf"^{who} +clients={clients} +procs=\d+ deliveries={clients * 200} deliveries/s=[\d,]+ "
                r"spread p50=[\d.]+ ms p99=[\d.]+ ms \(as read\) at arrival p50=[\d.]+ ms p99=[\d.]+ ms "
                r"clients' read lag p50=[\d.]+ ms p99=[\d.]+ ms server CPU/delivery=[\d.]+ µs .*"
                r"lost=0 duplicated=0 out_of_order=0 "
            )
            assert re.search(line, out, re.M), out
        ratio = rf"^sqlite +clients={clients} +server CPU/delivery agentd/floor = ([\d.]+|n/a) "
        assert re.search(ratio, out, re.M), out
    assert re.search(r"^postgres +clients=3 |^postgres skipped", out, re.M), out


def test_history_bench_smoke_prints_cpu_at_both_history_lengths_and_the_ratio() -> None:
    out = _run("history.py")
    for kind in ("trivial ", "one-tool"):
        line = (
            rf"^sqlite +{kind} history=2 turns: cpu/turn=[\d.]+ ms cpu/request=[\d.]+ ms \(6 turns\) \| "
            r"history=12 turns: cpu/turn=[\d.]+ ms cpu/request=[\d.]+ ms \(6 turns\) \| "
            r"ratio=([\d.]+|inf) \(target <= 1.5: (met|not met)\)"
        )
        assert re.search(line, out, re.M), out


def test_live_chunks_bench_smoke_prints_both_clients_delays_per_broker() -> None:
    out = _run("live_chunks.py")
    if "postgres skipped" in out:
        return  # replicas share a Postgres database: nothing to run without one
    figure = r"p50= *[\d.]+ p99= *[\d.]+ ms"
    for broker in ("notify", "redis"):
        line = (
            rf"^{broker} +sessions=1 +chunks=20 +owner {figure} \| non-owner {figure} \| "
            rf"p99 diff= *[+-][\d.]+ ms \((ok|OVER 50 ms)\) \| lag {figure} \| missed=\d+$"
        )
        assert re.search(line, out, re.M) or (broker == "redis" and "redis skipped" in out), out


def test_fairness_bench_smoke_prints_both_p99_with_and_without_the_flood() -> None:
    out = _run("fairness.py")
    for phase in ("baseline", r"flood \(defaults\)"):
        line = rf"^{phase} +B turns n=\d+ +p50= *[\d.]+ ms p99= *[\d.]+ ms .*\| /healthz n=\d+ +p50= "
        assert re.search(line, out, re.M), out
    assert re.search(r"^ +A's prompts: .*rate=\d+", out, re.M), out
    assert re.search(r"^side by side: flood \(defaults\): B p99 [\d.]+ ms vs [\d.]+ ms", out, re.M), out


def test_revocation_bench_smoke_prints_the_time_to_end_each_transport() -> None:
    out = _run("revocation.py")
    for name in ("websocket", "sse", "streamable http"):
        assert re.search(rf"^{name} +rounds=2 revoke -> ended: median= *\d+ ms max= *\d+ ms", out, re.M), out
    assert re.search(r"^worst \d+ ms; target <= 1 s: ", out, re.M), out


def test_floor_bench_smoke_prints_agentd_against_the_bare_relay_per_kind_of_turn() -> None:
    out = _run("floor.py")
    ratio = r"(?:[\d.]+|n/a)"
    for kind in ("trivial ", "one-tool"):
        line = (
            rf"^sqlite +{kind} turns=6 cpu/turn agentd=[\d.]+ ms floor=[\d.]+ ms ratio={ratio} "
            rf"\(target ≤ [\d.]+\) \| p50 agentd=[\d.]+ ms floor=[\d.]+ ms ratio={ratio}"
        )
        assert re.search(line, out, re.M), out
        # the relay replays agentd's own frames: the same WebSocket bytes within a few seqs' digits
        sizes = re.search(rf"^ +{kind} WebSocket bytes/turn agentd=(\d+) floor=(\d+)$", out, re.M)
        assert sizes, out
        assert abs(int(sizes[1]) - int(sizes[2])) < 0.05 * int(sizes[1]), out
        assert re.search(rf"^ +{kind} agentd threads \(ms CPU/turn\): loop [\d.]+", out, re.M), out
    assert re.search(r"^postgres +trivial  turns=6 |^postgres skipped", out, re.M), out


def test_floor_bench_profile_prints_each_process_split_by_thread_and_layer() -> None:
    """`--profile`: py-spy (a dev dependency) attaches to agentd and the relay for the measured
    turns; its samples come back split by thread, by layer and by function for both."""
    out = _run("floor.py", "--db", "sqlite", "--kinds", "trivial", "--profile")
    assert "one-tool" not in out, out
    assert "not found" not in out, out
    for who in ("agentd", "floor"):
        split = rf"^ +trivial  {who} samples/turn [\d.]+: loop [\d.]+, writer [\d.]+, other [\d.]+"
        assert re.search(split, out, re.M), out
        # (the layers come largest first: in a six-turn smoke any of them may lead)
        assert re.search(rf"^ +trivial  {who} loop by layer: [\w ./-]+ [\d.]+", out, re.M), out
        assert re.search(rf"^ +trivial  {who} loop self +[\d.]+ +[\d.]+% \S+:\S+", out, re.M), out

"""Budget gates (R-B1), grace (R-B2) and the budget checkpoint in a real git repo (R-B3)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
from pathlib import Path

import pytest

from agentd.core import BudgetStopKind
from agentd.core.provider import Usage
from agentd.loop.budget import (
    BudgetLimits,
    BudgetState,
    BudgetStop,
    check_budget,
    grace_decision,
    render_budget_stop,
)
from agentd.loop.checkpoint import CheckpointResult, checkpoint_budget_exhaustion

WIP = "wip: budget exhausted (#27e) — checkpointed mid-task"


class FakeClock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, s: float) -> None:
        self.t += s


def fresh(clock: FakeClock | None = None) -> tuple[BudgetState, FakeClock]:
    clock = clock or FakeClock()
    return BudgetState(clock=clock), clock


# --- defaults ---------------------------------------------------------------------------------


def test_defaults() -> None:
    lim = BudgetLimits()
    assert lim.max_iterations is None  # interactive: no cap
    assert lim.idle_progress_s == 300
    assert lim.activity_timeout_s == 1800
    assert lim.token_budget is None
    head = BudgetLimits.headless()
    assert head.max_iterations == 50
    assert (head.idle_progress_s, head.activity_timeout_s, head.token_budget) == (300, 1800, None)
    assert BudgetLimits.headless(max_iterations=7, token_budget=10).max_iterations == 7
    with pytest.raises(dataclasses.FrozenInstanceError):
        lim.max_iterations = 3  # type: ignore[misc]


def test_fresh_state_starts_the_clocks_now() -> None:
    state, clock = fresh()
    assert state.started_at == state.last_progress_at == state.last_activity_at == clock.t
    assert state.iteration == 0 and state.tokens_used == 0
    assert check_budget(state, BudgetLimits.headless()) is None


# --- gate order -------------------------------------------------------------------------------


def all_gates_hit() -> tuple[BudgetState, BudgetLimits, float]:
    state, clock = fresh()
    limits = BudgetLimits(max_iterations=3, idle_progress_s=300, activity_timeout_s=1800, token_budget=100)
    state.iteration = 3
    state.record_usage(Usage(input_tokens=100))
    clock.advance(2000)  # no progress, no activity since the start
    state.request_shutdown()
    return state, limits, clock.t


def test_every_gate_true_first_wins_then_remove_one_by_one() -> None:
    state, limits, now = all_gates_hit()
    expected = [
        BudgetStopKind.SHUTDOWN,
        BudgetStopKind.MAX_ITERATIONS,
        BudgetStopKind.IDLE_PROGRESS_TIMEOUT,
        BudgetStopKind.ACTIVITY_TIMEOUT,
        BudgetStopKind.TOKEN_BUDGET,
    ]
    removals = [
        lambda s, lim: (setattr(s, "shutdown", False), lim)[1],
        lambda s, lim: dataclasses.replace(lim, max_iterations=None),
        lambda s, lim: dataclasses.replace(lim, idle_progress_s=None),
        lambda s, lim: dataclasses.replace(lim, activity_timeout_s=None),
        lambda s, lim: dataclasses.replace(lim, token_budget=None),
    ]
    for kind, remove in zip(expected, removals, strict=True):
        stop = check_budget(state, limits, now)
        assert stop is not None and stop.kind is kind
        limits = remove(state, limits)
    assert check_budget(state, limits, now) is None


def test_gate_numbers() -> None:
    state, limits, now = all_gates_hit()
    state.shutdown = False
    assert check_budget(state, limits, now) == BudgetStop(BudgetStopKind.MAX_ITERATIONS, 3, 3)
    limits = dataclasses.replace(limits, max_iterations=None)
    assert check_budget(state, limits, now) == BudgetStop(BudgetStopKind.IDLE_PROGRESS_TIMEOUT, 300, 2000)
    limits = dataclasses.replace(limits, idle_progress_s=None)
    assert check_budget(state, limits, now) == BudgetStop(BudgetStopKind.ACTIVITY_TIMEOUT, 1800, 2000)
    limits = dataclasses.replace(limits, activity_timeout_s=None)
    assert check_budget(state, limits, now) == BudgetStop(BudgetStopKind.TOKEN_BUDGET, 100, 100)
    shutdown = BudgetStop(BudgetStopKind.SHUTDOWN)
    assert (shutdown.limit, shutdown.used) == (None, None)


def test_max_iterations_boundary() -> None:
    state, _ = fresh()
    limits = BudgetLimits(max_iterations=2)
    for _ in range(2):
        assert check_budget(state, limits) is None
        state.begin_iteration()
    assert check_budget(state, limits) == BudgetStop(BudgetStopKind.MAX_ITERATIONS, 2, 2)


def test_idle_progress_uses_injected_clock_and_progress_resets_it() -> None:
    state, clock = fresh()
    limits = BudgetLimits()
    clock.advance(299)
    assert check_budget(state, limits) is None
    state.mark_progress()
    clock.advance(299)
    assert check_budget(state, limits) is None
    clock.advance(1)
    stop = check_budget(state, limits)
    assert stop is not None and stop.kind is BudgetStopKind.IDLE_PROGRESS_TIMEOUT
    # Activity alone is not progress.
    state.mark_activity()
    assert check_budget(state, limits) == stop


def test_activity_timeout_only_when_old_and_silent() -> None:
    state, clock = fresh()
    limits = BudgetLimits(idle_progress_s=None)
    clock.advance(1799)
    assert check_budget(state, limits) is None
    clock.advance(1)
    assert check_budget(state, limits) == BudgetStop(BudgetStopKind.ACTIVITY_TIMEOUT, 1800, 1800)
    # Something happened recently: a long run keeps going.
    state.mark_activity()
    clock.advance(1000)
    assert check_budget(state, limits) is None
    # Progress counts as activity too.
    clock.advance(700)
    state.mark_progress()
    clock.advance(1700)
    assert check_budget(state, limits) is None


def test_token_sum_includes_cache_fields() -> None:
    state, _ = fresh()
    state.record_usage(
        Usage(input_tokens=100, output_tokens=50, cache_read_tokens=4000, cache_write_tokens=850)
    )
    assert state.tokens_used == 5000
    state.record_usage(Usage(input_tokens=1))
    assert state.tokens_used == 5001
    assert check_budget(state, BudgetLimits(token_budget=5002)) is None
    # Without the cache fields 151 tokens would be far below the budget; with them it is over.
    stop = check_budget(state, BudgetLimits(token_budget=5001))
    assert stop == BudgetStop(BudgetStopKind.TOKEN_BUDGET, 5001, 5001)


# --- rendering --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stop", "fragments"),
    [
        (BudgetStop(BudgetStopKind.MAX_ITERATIONS, 50, 50), ["50 iterations", "iteration"]),
        (BudgetStop(BudgetStopKind.MAX_ITERATIONS, 7, 9), ["7 iterations", "9 used"]),
        (BudgetStop(BudgetStopKind.TOKEN_BUDGET, 500, 1234), ["1234 of 500 tokens", "cache"]),
        (BudgetStop(BudgetStopKind.IDLE_PROGRESS_TIMEOUT, 300, 312.7), ["313s", "300s", "progress"]),
        (BudgetStop(BudgetStopKind.ACTIVITY_TIMEOUT, 1800, 2000), ["2000s", "1800s", "activity timeout"]),
        (BudgetStop(BudgetStopKind.IDLE_PROGRESS_TIMEOUT, 2, 2.5), ["2.5s", "2s"]),
        (BudgetStop(BudgetStopKind.SHUTDOWN), ["shutting down"]),
    ],
)
def test_render_includes_limit_and_used(stop: BudgetStop, fragments: list[str]) -> None:
    text = render_budget_stop(stop)
    for fragment in fragments:
        assert fragment in text
    assert stop.message() == text


def test_stop_to_event() -> None:
    stop = BudgetStop(BudgetStopKind.TOKEN_BUDGET, 100, 120)
    assert stop.to_event() == {
        "kind": "token_budget",
        "limit": 100,
        "used": 120,
        "message": render_budget_stop(stop),
    }


# --- grace ------------------------------------------------------------------------------------


def test_grace_only_for_iterations_and_tokens_with_productive_work_once() -> None:
    state, _ = fresh()
    iters = BudgetStop(BudgetStopKind.MAX_ITERATIONS, 5, 5)
    tokens = BudgetStop(BudgetStopKind.TOKEN_BUDGET, 10, 12)
    assert not grace_decision(iters, state)  # no productive tool call yet
    assert not grace_decision(tokens, state)
    state.record_productive_tool_call()
    assert grace_decision(iters, state)
    assert grace_decision(tokens, state)
    assert not state.grace_used  # deciding is pure; the loop grants
    state.grant_grace()
    state.record_productive_tool_call()
    assert not grace_decision(iters, state)  # once per turn
    assert not grace_decision(tokens, state)


@pytest.mark.parametrize(
    "kind",
    [BudgetStopKind.SHUTDOWN, BudgetStopKind.IDLE_PROGRESS_TIMEOUT, BudgetStopKind.ACTIVITY_TIMEOUT],
)
def test_no_grace_for_shutdown_and_timeouts(kind: BudgetStopKind) -> None:
    state, _ = fresh()
    for _ in range(3):
        state.record_productive_tool_call()
    assert not grace_decision(BudgetStop(kind, 1, 1), state)


# --- checkpoint (real git) --------------------------------------------------------------------


@pytest.fixture
def no_git_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No global/system git config, no identity: the checkpoint must bring its own."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    for var in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "EMAIL"):
        monkeypatch.delenv(var, raising=False)


def git(repo: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout


@pytest.fixture
def repo(tmp_path: Path, no_git_config: None) -> Path:
    """A repo with one commit, a bare 'origin' that has never received anything, and hooks that
    would push (post-commit) or reject (pre-commit) if they ran."""
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", str(origin)], check=True)
    work = tmp_path / "work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    (work / "app.py").write_text("print('v1')\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "initial")
    git(work, "remote", "add", "origin", str(origin))
    hooks = work / ".git" / "hooks"
    (hooks / "post-commit").write_text("#!/bin/sh\ngit push -q origin HEAD:refs/heads/main\n")
    (hooks / "pre-commit").write_text("#!/bin/sh\nexit 1\n")
    for hook in ("post-commit", "pre-commit"):
        (hooks / hook).chmod(0o755)
    return work


def head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD").strip()


def bare_refs(repo: Path) -> str:
    origin = repo.parent / "origin.git"
    return subprocess.run(
        ["git", "for-each-ref"], cwd=origin, check=True, capture_output=True, text=True
    ).stdout


MAX_ITER = BudgetStop(BudgetStopKind.MAX_ITERATIONS, 50, 50)


async def test_checkpoint_dirty_repo_commits_locally(repo: Path) -> None:
    before = head(repo)
    (repo / "app.py").write_text("print('v2 half done')\n")
    (repo / "new.txt").write_text("untracked work\n")

    result = await checkpoint_budget_exhaustion(repo, MAX_ITER, "## partial\n- step 1 done\n")

    assert isinstance(result, CheckpointResult)
    assert result.result_path == repo / ".agentd" / "result.md"
    assert result.result_path.read_text() == "## partial\n- step 1 done\n"
    assert result.limit == 50 and result.marker == "budget_exhausted:50"
    assert result.to_event()["resultPath"] == str(result.result_path)
    # Atomic write left no temp file behind.
    assert sorted(p.name for p in (repo / ".agentd").iterdir()) == ["result.md"]

    assert result.commit == head(repo) != before
    assert git(repo, "rev-parse", "HEAD~1").strip() == before
    assert git(repo, "log", "-1", "--format=%s").strip() == WIP
    assert git(repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>").strip() == (
        "agentd <agentd@localhost>|agentd <agentd@localhost>"
    )
    tree = git(repo, "ls-tree", "-r", "--name-only", "HEAD").split()
    assert {".agentd/result.md", "app.py", "new.txt"} <= set(tree)
    assert git(repo, "show", "HEAD:app.py") == "print('v2 half done')\n"
    assert git(repo, "show", "HEAD:.agentd/result.md") == "## partial\n- step 1 done\n"
    assert git(repo, "status", "--porcelain") == ""
    # Never pushed: the bare remote never received a ref, even with a pushing post-commit hook.
    assert bare_refs(repo) == ""


async def test_checkpoint_from_a_subdirectory_writes_at_top_level(repo: Path) -> None:
    sub = repo / "pkg"
    sub.mkdir()
    (sub / "mod.py").write_text("x = 1\n")
    result = await checkpoint_budget_exhaustion(sub, MAX_ITER, "partial")
    assert result is not None
    assert result.result_path == repo / ".agentd" / "result.md"
    assert "pkg/mod.py" in git(repo, "ls-tree", "-r", "--name-only", "HEAD")


async def test_checkpoint_clean_tree_does_nothing(repo: Path) -> None:
    before = head(repo)
    assert await checkpoint_budget_exhaustion(repo, MAX_ITER, "partial") is None
    assert head(repo) == before
    assert not (repo / ".agentd").exists()


async def test_checkpoint_non_git_dir_does_nothing(tmp_path: Path, no_git_config: None) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "f.txt").write_text("data")
    assert await checkpoint_budget_exhaustion(plain, MAX_ITER, "partial") is None
    assert sorted(p.name for p in plain.iterdir()) == ["f.txt"]
    assert await checkpoint_budget_exhaustion(tmp_path / "missing", MAX_ITER, "partial") is None


@pytest.mark.parametrize(
    "stop",
    [
        BudgetStop(BudgetStopKind.SHUTDOWN),
        BudgetStop(BudgetStopKind.TOKEN_BUDGET, 10, 11),
        BudgetStop(BudgetStopKind.IDLE_PROGRESS_TIMEOUT, 300, 300),
        BudgetStop(BudgetStopKind.ACTIVITY_TIMEOUT, 1800, 1800),
    ],
)
async def test_checkpoint_only_for_max_iterations(repo: Path, stop: BudgetStop) -> None:
    before = head(repo)
    (repo / "app.py").write_text("dirty\n")
    assert await checkpoint_budget_exhaustion(repo, stop, "partial") is None
    assert head(repo) == before
    assert not (repo / ".agentd").exists()

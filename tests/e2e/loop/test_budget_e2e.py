"""Budget gates in the running loop (R-B1, R-B2, R-B3), over a real WebSocket.

- max iterations: a model that keeps calling tools is stopped at the top of the iteration
  after the cap; the prompt ends `max_turn_requests` with `_meta.agentd.reason` naming the
  gate, and `turn_ended.turn.budgetStop` carries the numbers;
- grace: with at least one successful tool call the first exhaustion gets exactly one more
  iteration (the wrap-up message is in that request), never a second one; without a
  productive call there is no grace;
- token budget: input + output + cache read + cache write are counted;
- idle-progress / activity timeouts: the gates run only at the top of an iteration, and a
  finished sample or tool round counts as progress, so a slow *tool* can never trip them
  (shown below). What trips them is time spent between iterations outside sampling and
  tools: here a slow stop hook (L2) that sends the turn back into L3;
- the stop notice: a client advertising `session.notices` gets an ACP `notice` update,
  a plain client the same payload as an `_agentd/event`;
- checkpoint: a max-iterations stop in a dirty git worktree makes a local WIP commit with
  the change and the partial result; nothing is pushed; clean trees and non-git
  workspaces get nothing.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from agentd.core import BudgetStopKind
from agentd.infra.config import PermissionMode
from agentd.loop.budget import BudgetStop, render_budget_stop
from agentd.loop.checkpoint import CheckpointConfig
from agentd.loop.react.run import GRACE_TEXT
from tests.support.acp_schema import AcpValidator
from tests.support.client import WsClient, text_prompt
from tests.support.server import scripted
from tests.support.session import events as ext_events
from tests.support.session import new_session, served_session, the_turn_end

# ---------------------------------------------------------------------------- helpers


def list_dir_step(text: str = "Looking around.") -> dict[str, Any]:
    return {"text": text, "tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]}


def failing_read_step() -> dict[str, Any]:
    """A tool call that runs but fails (no such file): not a productive call."""
    return {"text": "Reading.", "tool_calls": [{"name": "read_file", "arguments": {"path": "missing.txt"}}]}


def user_texts(request: Any) -> list[str]:
    return [m.content for m in request.messages if m.role == "user"]


def grace_text(limit: int | float, used: int | float, kind: BudgetStopKind) -> str:
    return GRACE_TEXT.format(message=render_budget_stop(BudgetStop(kind, limit, used)))


def tool_statuses(client: WsClient, session_id: str) -> list[str]:
    return [
        u["status"]
        for u in client.updates(session_id)
        if u["sessionUpdate"] == "tool_call_update" and u.get("status") in ("completed", "failed")
    ]


# ---------------------------------------------------------------------------- max iterations


async def test_max_iterations_without_productive_call_stops_hard(server_factory, workspace: Path) -> None:
    provider = scripted(failing_read_step(), loop=True)
    async with served_session(server_factory, workspace, provider, max_iterations=3) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "find the notes"))

        assert result["stopReason"] == "max_turn_requests"
        assert result["_meta"]["agentd"]["outcome"] == "budget_stopped"
        assert result["_meta"]["agentd"]["reason"] == "max_iterations"
        assert len(provider.requests) == 3  # three iterations, no grace: nothing was productive
        assert tool_statuses(client, sid) == ["failed", "failed", "failed"]
        ended = the_turn_end(client, sid)
        assert (ended["outcome"], ended["stopReason"], ended["reason"]) == (
            "budget_stopped",
            "max_turn_requests",
            "max_iterations",
        )
        turn = ended["turn"]
        assert turn["iterations"] == 3
        assert "grace" not in turn
        stop = turn["budgetStop"]
        assert (stop["kind"], stop["limit"], stop["used"]) == ("max_iterations", 3, 3)
        assert stop["message"] == render_budget_stop(BudgetStop(BudgetStopKind.MAX_ITERATIONS, 3, 3))
        assert "checkpoint" not in stop  # not a git worktree
        for request in provider.requests:
            assert not any("one more step to wrap up" in t for t in user_texts(request))


async def test_grace_gives_exactly_one_extra_iteration_with_the_wrap_up_message(
    server_factory, workspace: Path
) -> None:
    # The model ignores the wrap-up request and keeps calling tools: it gets one extra
    # iteration (the 4th), never a second one.
    provider = scripted(list_dir_step(), loop=True)
    async with served_session(server_factory, workspace, provider, max_iterations=3) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "explore forever"))

        assert result["stopReason"] == "max_turn_requests"
        assert result["_meta"]["agentd"]["reason"] == "max_iterations"
        assert len(provider.requests) == 4
        expected = grace_text(3, 3, BudgetStopKind.MAX_ITERATIONS)
        assert [user_texts(r).count(expected) for r in provider.requests] == [0, 0, 0, 1]
        assert provider.requests[3].messages[-1].role == "user"
        assert provider.requests[3].messages[-1].content == expected  # the last word before sampling
        assert tool_statuses(client, sid) == ["completed"] * 4
        turn = the_turn_end(client, sid)["turn"]
        assert turn["grace"] is True
        assert turn["iterations"] == 4
        stop = turn["budgetStop"]
        assert (stop["kind"], stop["limit"], stop["used"]) == ("max_iterations", 3, 4)


async def test_grace_iteration_can_finish_the_turn(server_factory, workspace: Path) -> None:
    provider = scripted(
        list_dir_step(),
        list_dir_step(),
        {"expect": "wrap up", "text": "Summary: I listed the workspace twice; nothing else to do."},
    )
    async with served_session(server_factory, workspace, provider, max_iterations=2) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "explore"))

        assert result["stopReason"] == "end_turn"
        assert result["_meta"]["agentd"]["outcome"] == "completed"
        ended = the_turn_end(client, sid)
        assert ended["turn"]["grace"] is True
        assert ended["turn"]["iterations"] == 3
        assert "budgetStop" not in ended["turn"]
        assert ext_events(client, sid, "notice") == []
        # Grace is per turn: the next prompt starts with a fresh budget.
        provider.reset()
        again = await client.call("session/prompt", text_prompt(sid, "again"))
        assert again["stopReason"] == "end_turn"
        ended = ext_events(client, sid, "turn_ended")[-1]
        assert ended["turn"]["grace"] is True and ended["turn"]["iterations"] == 3


# ---------------------------------------------------------------------------- token budget


async def test_token_budget_counts_cache_reads_and_writes(server_factory, workspace: Path) -> None:
    # input + output alone (30) is far below the budget; with the cache tokens it is 105.
    usage = {"input_tokens": 20, "output_tokens": 10, "cache_read_tokens": 40, "cache_write_tokens": 35}
    provider = scripted({**failing_read_step(), "usage": usage}, loop=True)
    async with served_session(server_factory, workspace, provider, token_budget=100) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "read it"))

        assert result["stopReason"] == "max_turn_requests"
        assert result["_meta"]["agentd"]["reason"] == "token_budget"
        assert len(provider.requests) == 1  # stopped at the top of the 2nd iteration, no grace
        turn = the_turn_end(client, sid)["turn"]
        assert "grace" not in turn
        stop = turn["budgetStop"]
        assert (stop["kind"], stop["limit"], stop["used"]) == ("token_budget", 100, 105)
        assert "105 of 100 tokens" in stop["message"]
        assert turn["usage"]["totalTokens"] == 105


async def test_token_budget_grace_once_after_a_productive_call(server_factory, workspace: Path) -> None:
    usage = {"input_tokens": 50, "output_tokens": 10, "cache_read_tokens": 30, "cache_write_tokens": 15}
    provider = scripted({**list_dir_step(), "usage": usage}, loop=True)
    async with served_session(server_factory, workspace, provider, token_budget=100) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "explore"))

        assert result["_meta"]["agentd"]["reason"] == "token_budget"
        assert len(provider.requests) == 2  # the one grace iteration, then a hard stop
        expected = grace_text(100, 105, BudgetStopKind.TOKEN_BUDGET)
        assert [user_texts(r).count(expected) for r in provider.requests] == [0, 1]
        turn = the_turn_end(client, sid)["turn"]
        assert turn["grace"] is True
        stop = turn["budgetStop"]
        assert (stop["kind"], stop["limit"], stop["used"]) == ("token_budget", 100, 210)


# ---------------------------------------------------------------------------- idle / activity timeouts


async def test_a_slow_tool_is_progress_and_does_not_trip_the_idle_gate(
    server_factory, workspace: Path
) -> None:
    """The brief's case "bash sleep 0.5 with idle_progress_s=0.2, then the next gate stops"
    cannot happen: the loop marks progress when the tool round finishes, right before the
    next gate runs. The turn simply completes."""
    provider = scripted(
        {"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 0.5"}}]},
        {"text": "Slept."},
    )
    async with served_session(
        server_factory,
        workspace,
        provider,
        idle_progress_s=0.2,
        activity_timeout_s=0.2,
        permission_mode=PermissionMode.BYPASS,
    ) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "sleep a bit"))

        assert result["stopReason"] == "end_turn"
        assert tool_statuses(client, sid) == ["completed"]
        assert "budgetStop" not in the_turn_end(client, sid)["turn"]


def slow_blocking_stop_hook(tmp_path: Path) -> Path:
    """A stop hook that takes 0.5 s and then sends the turn back to work (L2 → L3 again)."""
    script = tmp_path / "slow_stop_hook.sh"
    script.write_text(
        "#!/bin/sh\ncat >/dev/null\nsleep 0.5\n"
        'echo \'{"decision": "block", "reason": "the tests still fail"}\'\n'
    )
    hooks = tmp_path / "hooks.toml"
    hooks.write_text(f'[[stop]]\ncommand = "sh {script}"\ntimeout = 30\n')
    return hooks


@pytest.mark.parametrize(
    ("gates", "kind"),
    [
        ({"idle_progress_s": 0.2, "activity_timeout_s": None}, "idle_progress_timeout"),
        ({"idle_progress_s": None, "activity_timeout_s": 0.2}, "activity_timeout"),
        # Both would fire: the fixed order puts idle progress before the activity timeout.
        ({"idle_progress_s": 0.2, "activity_timeout_s": 0.2}, "idle_progress_timeout"),
    ],
)
async def test_time_spent_between_iterations_trips_the_timeout_gates(
    server_factory, workspace: Path, tmp_path: Path, gates: dict[str, Any], kind: str
) -> None:
    provider = scripted(list_dir_step(), {"text": "All done."}, {"text": "never sampled"})
    hooks = slow_blocking_stop_hook(tmp_path)
    async with served_session(server_factory, workspace, provider, hooks_file=hooks, **gates) as (
        _,
        client,
        sid,
    ):
        result = await client.call("session/prompt", text_prompt(sid, "finish the task"))

        assert result["stopReason"] == "max_turn_requests"
        assert result["_meta"]["agentd"]["reason"] == kind
        # The productive list_dir does not buy grace: timeouts always stop hard.
        assert len(provider.requests) == 2
        turn = the_turn_end(client, sid)["turn"]
        assert "grace" not in turn
        assert turn["stopReentries"] == 1
        stop = turn["budgetStop"]
        assert stop["kind"] == kind
        assert stop["limit"] == 0.2
        assert stop["used"] >= stop["limit"]  # what the gate compared, not a wall-clock assertion
        assert ext_events(client, sid, "stop_hooks")[0]["verdicts"][0]["decision"] == "block"


# ---------------------------------------------------------------------------- the notice


async def test_notice_is_an_acp_update_for_clients_that_advertise_it_else_an_ext_event(
    server_factory, workspace: Path
) -> None:
    provider = scripted(failing_read_step(), loop=True)
    async with server_factory(provider, max_iterations=3) as server:
        plain = await server.client()
        aware = await server.client(session={"notices": {}})
        sid = await new_session(plain, workspace)
        await aware.call("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})

        result = await plain.call("session/prompt", text_prompt(sid, "find the notes"))
        assert result["_meta"]["agentd"]["reason"] == "max_iterations"
        # The aware client is not the prompter: wait until its copy of the turn has ended.
        await aware.wait_notification(
            lambda m: m.get("method") == "_agentd/event" and m["params"]["kind"] == "turn_ended"
        )

        message = render_budget_stop(BudgetStop(BudgetStopKind.MAX_ITERATIONS, 3, 3))
        assert "within 3 iterations" in message and "(3 used)" in message
        expected = {"severity": "warning", "title": message}

        aware_notices = [u for u in aware.updates(sid) if u["sessionUpdate"] == "notice"]
        assert aware_notices == [{"sessionUpdate": "notice", **expected}]
        assert ext_events(aware, sid, "notice") == []

        assert [u for u in plain.updates(sid) if u["sessionUpdate"] == "notice"] == []
        assert ext_events(plain, sid, "notice") == [expected]
        validator = AcpValidator.default()  # the notice update and the ext event are valid ACP
        for client in (plain, aware):
            for frame in client.frames:
                validator.assert_valid_agent_frame(frame, client.sent_methods)
        await plain.close()
        await aware.close()


# ---------------------------------------------------------------------------- checkpoint (R-B3)


def git(repo: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "-c", "user.name=tester", "-c", "user.email=tester@example.com", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout


@pytest.fixture
def isolated_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No user/system git config, and git never looks above tmp_path for a repository."""
    home = tmp_path / "githome"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))


@pytest.fixture
def repo(tmp_path: Path, isolated_git: None) -> Path:
    """A real repo with one commit and a bare `origin` that has never received anything."""
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", str(origin)], check=True)
    work = (tmp_path / "repo").resolve()
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    (work / "README.md").write_text("# Project\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "initial")
    git(work, "remote", "add", "origin", str(origin))
    return work


def origin_refs(repo: Path) -> str:
    return subprocess.run(
        ["git", "for-each-ref"], cwd=repo.parent / "origin.git", check=True, capture_output=True, text=True
    ).stdout


def checkpoint_script() -> Any:
    return scripted(
        {
            "text": "Updating the README.",
            "tool_calls": [
                {
                    "name": "write_file",
                    "arguments": {"path": "README.md", "content": "# Project\n\nHalf done\n"},
                }
            ],
        },
        list_dir_step("Checking the tree."),
        list_dir_step("Partial result: README updated, docs still to write."),  # the grace iteration
        {"text": "never sampled"},
    )


async def test_max_iterations_in_a_dirty_repo_commits_a_local_checkpoint(server_factory, repo: Path) -> None:
    before = git(repo, "rev-parse", "HEAD").strip()
    provider = checkpoint_script()
    async with served_session(
        server_factory, repo, provider, max_iterations=2, permission_mode=PermissionMode.BYPASS
    ) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "update the docs"))

        assert result["_meta"]["agentd"]["reason"] == "max_iterations"
        assert len(provider.requests) == 3
        stop = the_turn_end(client, sid)["turn"]["budgetStop"]

    head = git(repo, "rev-parse", "HEAD").strip()
    assert head != before
    assert git(repo, "rev-parse", "HEAD~1").strip() == before  # one commit on top, locally
    assert git(repo, "log", "-1", "--format=%s").strip() == CheckpointConfig().commit_message
    assert (
        git(repo, "log", "-1", "--format=%s").strip()
        == "wip: budget exhausted (#27e) — checkpointed mid-task"
    )
    assert git(repo, "log", "-1", "--format=%an <%ae>").strip() == "agentd <agentd@localhost>"
    changed = set(git(repo, "show", "--name-only", "--format=", "HEAD").split())
    assert changed == {"README.md", ".agentd/result.md"}
    assert git(repo, "show", "HEAD:README.md") == "# Project\n\nHalf done\n"
    result_text = git(repo, "show", "HEAD:.agentd/result.md")
    assert result_text == "Partial result: README updated, docs still to write."
    assert git(repo, "status", "--porcelain") == ""  # everything is in the commit
    assert not [p for p in (repo / ".agentd").iterdir() if p.name.endswith(".tmp")]  # atomic write
    assert origin_refs(repo) == ""  # never pushed
    assert stop["checkpoint"] == {
        "commit": head,
        "resultPath": str(repo / ".agentd" / "result.md"),
        "limit": 2,
        "marker": "budget_exhausted:2",
    }


async def test_max_iterations_in_a_clean_repo_commits_nothing(server_factory, repo: Path) -> None:
    before = git(repo, "rev-parse", "HEAD").strip()
    provider = scripted(list_dir_step(), loop=True)  # read-only: the tree stays clean
    async with served_session(server_factory, repo, provider, max_iterations=2) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "look around"))

        assert result["_meta"]["agentd"]["reason"] == "max_iterations"
        stop = the_turn_end(client, sid)["turn"]["budgetStop"]

    assert "checkpoint" not in stop
    assert git(repo, "rev-parse", "HEAD").strip() == before
    assert git(repo, "status", "--porcelain") == ""
    assert not (repo / ".agentd").exists()
    assert origin_refs(repo) == ""


async def test_max_iterations_in_a_non_git_workspace_commits_nothing(
    server_factory, workspace: Path, isolated_git: None
) -> None:
    provider = checkpoint_script()
    (workspace / "README.md").write_text("# Project\n")
    async with served_session(
        server_factory, workspace, provider, max_iterations=2, permission_mode=PermissionMode.BYPASS
    ) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "update the docs"))

        assert result["_meta"]["agentd"]["reason"] == "max_iterations"
        stop = the_turn_end(client, sid)["turn"]["budgetStop"]

    assert "checkpoint" not in stop
    assert (workspace / "README.md").read_text() == "# Project\n\nHalf done\n"  # the work itself is there
    assert not (workspace / ".agentd").exists()
    assert not (workspace / ".git").exists()

"""The budget-exhaustion checkpoint (R-B3): on a hard max-iterations stop in a dirty git
worktree, write the partial result and make a local WIP commit, so an orchestrator can push
or resume the work. This acts on the workspace (it runs git); the decision that a budget
stopped the turn is `budget.check_budget`'s.
"""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentd.core import BudgetStopKind, checkpoint_wire
from agentd.loop.budget import BudgetStop

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CheckpointConfig:
    """Where and how the checkpoint lands."""

    result_path: str = ".agentd/result.md"  # relative to the worktree's top level
    commit_message: str = "wip: budget exhausted (#27e) — checkpointed mid-task"  # 003's words
    # Passed via env, so the commit works with no git config at all and is recognisably ours.
    author_name: str = "agentd"
    author_email: str = "agentd@localhost"
    git_timeout_s: float = 30.0


@dataclass(frozen=True)
class CheckpointResult:
    commit: str  # sha of the WIP commit
    result_path: Path  # absolute path of the written partial result
    limit: int  # the iteration cap that was exhausted

    @property
    def marker(self) -> str:
        """Short tag a task result can carry so a re-dispatcher knows work was checkpointed."""
        return f"budget_exhausted:{self.limit}"

    def to_event(self) -> dict[str, Any]:
        return checkpoint_wire(self.commit, str(self.result_path), self.limit, self.marker)


class _GitFailed(Exception):
    pass


def _git_env(config: CheckpointConfig) -> dict[str, str]:
    env = dict(os.environ)
    # An inherited GIT_DIR (e.g. agentd started from a hook) would point git at another repo.
    for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY"):
        env.pop(var, None)
    env.update(
        GIT_AUTHOR_NAME=config.author_name,
        GIT_AUTHOR_EMAIL=config.author_email,
        GIT_COMMITTER_NAME=config.author_name,
        GIT_COMMITTER_EMAIL=config.author_email,
        GIT_TERMINAL_PROMPT="0",
    )
    return env


async def _git(cwd: Path, *args: str, env: dict[str, str], timeout_s: float) -> str:
    """Run one git command; stdout on success, `_GitFailed` otherwise (incl. git missing, timeout)."""
    try:
        proc = await asyncio.create_subprocess_exec(
            "git",
            *args,
            cwd=cwd,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as exc:  # git not installed, cwd vanished
        raise _GitFailed(f"git {args[0]}: {exc}") from exc
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout_s)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise _GitFailed(f"git {args[0]}: timed out after {timeout_s}s") from None
    if proc.returncode != 0:
        raise _GitFailed(f"git {args[0]}: exit {proc.returncode}: {err.decode(errors='replace').strip()}")
    return out.decode(errors="replace")


def _write_atomically(path: Path, text: str) -> None:
    """Temp file in the same directory + os.replace: a reader sees the old file or the new
    one, never half of one, and a crash leaves no partial result behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


async def checkpoint_budget_exhaustion(
    workdir: Path,
    stop: BudgetStop,
    partial_result: str,
    *,
    config: CheckpointConfig = CheckpointConfig(),
) -> CheckpointResult | None:
    """Save a max-iterations stop's work as a local WIP commit (R-B3).

    Acts only when all three hold: the stop is max_iterations (the other stops have different
    re-dispatch semantics), `workdir` is inside a git worktree, and that worktree is dirty
    (a clean tree gets no empty commit). Then: write `partial_result` atomically, `git add -A`,
    commit. Never pushes — hooks are switched off for the commit so not even a post-commit
    hook can push. Best effort: any git failure is logged and yields None; a checkpoint must
    never turn a budget stop into a crash.
    """
    if stop.kind is not BudgetStopKind.MAX_ITERATIONS:
        return None
    env = _git_env(config)

    async def git(cwd: Path, *args: str) -> str:
        return await _git(cwd, *args, env=env, timeout_s=config.git_timeout_s)

    try:
        probe = await git(workdir, "rev-parse", "--is-inside-work-tree", "--show-toplevel")
    except _GitFailed:
        return None  # not a git worktree (or no such directory): nothing to checkpoint
    lines = probe.splitlines()
    if len(lines) < 2 or lines[0].strip() != "true":
        return None  # e.g. inside a .git directory
    top = Path(lines[1].strip())
    # Hooks off (pre-commit lint would reject a WIP commit; post-commit could push), no signing
    # prompt that would hang a headless server.
    no_hooks = ("-c", "core.hooksPath=/dev/null", "-c", "commit.gpgsign=false")
    try:
        if not (await git(top, "status", "--porcelain")).strip():
            return None  # clean tree: nothing to lose, no empty commit
        result_path = top / config.result_path
        await asyncio.to_thread(_write_atomically, result_path, partial_result)
        await git(top, *no_hooks, "add", "-A")
        await git(top, *no_hooks, "commit", "--no-verify", "-q", "-m", config.commit_message)
        sha = (await git(top, "rev-parse", "HEAD")).strip()
    except (_GitFailed, OSError) as exc:
        log.warning("budget checkpoint in %s failed: %s", top, exc)
        return None
    limit = int(stop.limit) if stop.limit is not None else 0
    return CheckpointResult(commit=sha, result_path=result_path, limit=limit)

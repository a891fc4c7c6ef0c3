"""Background shell tasks (`bash` with run_in_background) and the `wait` / `task_output` tools.

A `BackgroundTasks` belongs to one session. `start()` returns a task id at once and runs
`/bin/bash -c COMMAND` in its own process group (same spawning as the `bash` tool: cwd
the workspace, stdin /dev/null, stderr merged, output kept in a capped head+tail buffer).
When the shell exits, leftovers in its group get a short drain and are then killed, as
with `bash`. An optional timeout ends the group with SIGTERM, then SIGKILL. `close()` kills
every group; the session calls it when it ends.

Each finished task is announced once (agentd/core/task_notice.py): `on_finished` tells the
session at once (its clients get an event), and `take_completions` hands the turn the ones
the model has not seen yet, for the reminder before its next sampling round. `on_started`
lets the session log each start, so that after a restart a task that died with the process
is known and ended `interrupted` (`earlier`: agentd/core/task_history.py).

Waits are preemptible (R-T7): `wait()` returns early with reason `interrupted` as soon as
the session's `interrupted` event is set (also when it is already set), so user input
waiting to be interjected is never stuck behind a long wait.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar, Literal

from agentd.core import (
    EarlierTasks,
    TaskCompletion,
    TaskEnd,
    TaskKind,
    TaskStart,
    output_call,
    stop_runners,
    wait_for_any,
)
from agentd.tools.agent_tasks import AgentTasks
from agentd.tools.base import Access, ToolContext, ToolKind, ToolResult
from agentd.tools.errors import ToolError
from agentd.tools.shell.bash import (
    Stopped,
    _signal_name,
    _Spawn,
    end_command_now,
    kill_spawned_callback,
    new_output,
    run_to_end,
    spawn_shell,
)
from agentd.tools.shell.launch import ShellLauncher
from agentd.tools.shell.output import ShellOutput
from agentd.tools.shell.proctrack import kill_all_now, new_tag

log = logging.getLogger(__name__)

MAX_RUNNING = 16  # concurrently running tasks per session
DEFAULT_WAIT = 30.0
MAX_WAIT = 600.0
INTERRUPTED_TEXT = "interrupted by new user input"
_CLOSE_GRACE = 5.0  # close(): how long to wait for killed tasks to be reaped

WaitReason = Literal["done", "timeout", "interrupted", "idle"]


@dataclass
class WaitResult:
    """Why `BackgroundTasks.wait` returned.

    - `done`: `task_id` finished (for a wait on any task: the one that finished first).
    - `timeout`: the time ran out; `task_id` is the awaited task (None for "any").
    - `interrupted`: `interrupted` was set (R-T7); nothing is implied about the tasks.
    - `idle`: a wait on any task found none running and no unreported finished one.
    """

    reason: WaitReason
    task_id: str | None = None
    running: list[str] = field(default_factory=list)  # ids still running when it returned


@dataclass
class _Task:
    id: str
    command: str
    timeout: float | None
    out: ShellOutput
    shell: ShellLauncher
    finished: asyncio.Future[None]
    runner: asyncio.Task[None] | None = None
    pid: int | None = None
    tag: str = field(default_factory=new_tag)  # finds processes that left the group (setsid)
    returncode: int | None = None
    stopped: Stopped | None = None  # ended early by its timeout or the output limit
    killed: bool = False
    error: str | None = None  # could not start
    reported: bool = False  # its completion was shown to the model (wait / output / reminder)

    @property
    def done(self) -> bool:
        return self.finished.done()


def _mark_finished(t: _Task, on_finished: Callable[[str], None] | None = None) -> None:
    if t.finished.done():
        return  # the runner's body and its done-callback both get here: report once
    t.finished.set_result(None)
    if on_finished is not None:
        try:
            on_finished(t.id)
        except Exception:  # the task's end stands whatever the listener does
            log.exception("background task %s: on_finished failed", t.id)


class BackgroundTasks:
    """The background shell tasks of one session."""

    def __init__(
        self,
        on_finished: Callable[[str], None] | None = None,
        on_started: Callable[[TaskStart], None] | None = None,
    ) -> None:
        self._tasks: dict[str, _Task] = {}
        self._ids = itertools.count(1)
        self._closed = False
        # Called once per task, right after it finished (the session emits the event).
        self.on_finished = on_finished
        # Called as it starts: the session logs it, so a restart knows it was running.
        self.on_started = on_started
        # Tasks of the session's earlier lives (agentd/core/task_history.py).
        self.earlier = EarlierTasks()

    def resume_ids(self, after: int) -> None:
        """Number new tasks after `after` (ids of an earlier life stay unambiguous)."""
        self._ids = itertools.count(after + 1)

    def _finished(self, t: _Task) -> None:
        _mark_finished(t, self.on_finished)

    # --- lifecycle ---

    def start(
        self, command: str, cwd: Path, timeout: float | None = None, *, shell: ShellLauncher | None = None
    ) -> str:
        """Start `command` and return its task id; the process spawns on the running loop.
        `shell`: how it starts (the sandbox); unconfined by default."""
        if self._closed:
            raise ToolError("the session is closing; no new background tasks can be started")
        if not isinstance(command, str) or not command.strip():
            raise ToolError("command must be a non-empty string")
        running = self.running()
        if len(running) >= MAX_RUNNING:
            raise ToolError(
                f"{len(running)} background tasks are already running ({', '.join(running)}); "
                "wait for one to finish before starting another"
            )
        loop = asyncio.get_running_loop()
        shell = shell or ShellLauncher()
        task = _Task(
            id=f"bg-{next(self._ids)}",
            command=command,
            timeout=timeout,
            out=new_output(Path(cwd), shell),
            shell=shell,
            finished=loop.create_future(),
        )
        self._tasks[task.id] = task
        if self.on_started is not None:
            now = datetime.now(UTC).isoformat()
            self.on_started(TaskStart(task.id, TaskKind.BASH, command, now))
        task.runner = loop.create_task(self._run(task, Path(cwd)), name=f"background {task.id}")
        # Also covers a runner cancelled before its first step, whose body never runs.
        task.runner.add_done_callback(lambda _: self._finished(task))
        return task.id

    async def _run(self, t: _Task, cwd: Path) -> None:
        if t.killed:  # killed before it ever ran
            self._finished(t)
            return
        try:
            launch = t.shell.prepare(t.command, cwd, t.tag)
        except ToolError as exc:
            t.error = str(exc)
            self._finished(t)
            return
        spawn: _Spawn = asyncio.ensure_future(spawn_shell(t.out, launch, cwd))
        try:
            try:
                transport, proto = await asyncio.shield(spawn)
            except asyncio.CancelledError:
                spawn.add_done_callback(kill_spawned_callback(t.tag))
                t.killed = True
                raise
            except OSError as exc:
                t.error = f"cannot start /bin/bash in {cwd}: {exc}"
                return
            t.pid = transport.get_pid()
            if t.killed:  # kill() came while the process was being spawned
                end_command_now(transport, t.tag)
            try:
                # As in bash: time and output limits, then nothing of the group survives.
                t.stopped = await run_to_end(transport, proto, t.tag, t.timeout)
            except BaseException:
                end_command_now(transport, t.tag)
                t.killed = True
                raise
            finally:
                transport.close()
                t.returncode = transport.get_returncode()
                t.out.finish()
        except Exception:  # never leave a waiter hanging on an unexpected failure
            log.exception("background task %s failed", t.id)
            t.error = t.error or "internal error while running the task"
        finally:
            launch.release()
            self._finished(t)

    def completion(self, task_id: str) -> TaskCompletion:
        """The finished task as announced to the model and to clients."""
        t = self._get(task_id)
        rc = t.returncode
        if t.error is None and t.stopped is None and rc == 0:
            end = TaskEnd.COMPLETED
        elif t.error is None and t.stopped is None and (rc is None or rc < 0):
            end = TaskEnd.KILLED
        else:
            end = TaskEnd.FAILED
        return TaskCompletion(t.id, TaskKind.BASH, t.command, end, self.status(t.id), rc, output_call(t.id))

    def unreported(self) -> list[TaskCompletion]:
        """Finished tasks (of this life and earlier ones) the model has not seen yet."""
        if not self._tasks:  # asked at every turn's end (wake.py); most sessions run none
            return self.earlier.unreported()
        mine = [self.completion(t.id) for t in self._tasks.values() if t.done and not t.reported]
        return [*self.earlier.unreported(), *mine]

    def take_completions(self) -> list[TaskCompletion]:
        """Finished tasks not yet announced, each handed out once. A task whose end the
        model already saw through `wait` / `task_output` is not announced again."""
        out = self.earlier.take_completions()
        if not self._tasks:  # asked before every sampling round; most sessions run none
            return out
        for t in self._tasks.values():
            if t.done and not t.reported:
                t.reported = True  # announced: never again, and `wait` for any task skips it
                out.append(self.completion(t.id))
        return out

    def kill(self, task_id: str) -> bool:
        """SIGKILL the task's process group; False if it had already finished."""
        t = self._get(task_id)
        if t.done:
            return False
        t.killed = True
        # Not yet spawned: the runner sees `killed` and kills the group as soon as it has one,
        # so the task still ends with a real exit status. Either way the runner then finishes.
        if t.pid is not None:
            # The shell may be gone already (its leftovers draining): trust only the tag.
            kill_all_now(t.pid, t.tag)
        return True

    async def close(self) -> None:
        """Kill every task's process group and wait (bounded) until they are reaped."""
        self._closed = True
        for t in self._tasks.values():
            if not t.done:
                self.kill(t.id)
        runners = [t.runner for t in self._tasks.values() if t.runner is not None]
        await stop_runners(runners, _CLOSE_GRACE)

    # --- queries ---

    def _get(self, task_id: str) -> _Task:
        t = self._tasks.get(task_id) if isinstance(task_id, str) else None
        if t is None:
            known = ", ".join(self._tasks) or "none"
            raise ToolError(f"no background task {task_id!r} in this session (known tasks: {known})")
        return t

    def ids(self) -> list[str]:
        return list(self._tasks)

    def running(self) -> list[str]:
        return [t.id for t in self._tasks.values() if not t.done]

    def output(self, task_id: str) -> tuple[str, bool, int | None]:
        """(output so far, done, exit code). The exit code is None while running or if the
        task never started, negative (-N) if the shell died from signal N."""
        t = self._get(task_id)
        if t.done:
            t.reported = True
        return t.out.render(), t.done, t.returncode

    def notes(self, task_id: str) -> list[str]:
        """Lines after the output: the output limit, the log with the full output."""
        return self._get(task_id).out.notes()

    def status(self, task_id: str) -> str:
        """One line for the model: running, exit code, signal, timeout or start failure."""
        t = self._get(task_id)
        if not t.done:
            return f"task {t.id} is still running"
        if t.error is not None:
            return f"task {t.id} failed: {t.error}"
        if t.stopped is Stopped.TIMEOUT:
            return f"task {t.id} timed out after {t.timeout:g} s and was killed"
        if t.stopped is Stopped.OUTPUT:
            return f"task {t.id} was stopped for printing too much output"
        rc = t.returncode
        if rc is not None and rc < 0:
            how = "was killed" if t.killed else "was terminated"
            return f"task {t.id} {how} by signal {_signal_name(-rc)}"
        if rc is None:
            return f"task {t.id} was killed"
        return f"task {t.id} finished with exit code {rc}"

    # --- waiting ---

    async def wait(
        self,
        task_id: str | None,
        timeout_s: float,
        interrupted: asyncio.Event | None = None,
    ) -> WaitResult:
        """Wait until `task_id` (or, with None, any task) finishes, `timeout_s` passes, or
        `interrupted` is set. With None, a task that finished since it was last reported
        counts as finished right away."""
        if interrupted is not None and interrupted.is_set():
            return WaitResult("interrupted", task_id, self.running())
        if task_id is not None:
            t = self._get(task_id)
            if t.done:
                t.reported = True
                return WaitResult("done", t.id, self.running())
            targets = [t]
        else:
            unreported = [t for t in self._tasks.values() if t.done and not t.reported]
            if unreported:
                unreported[0].reported = True
                return WaitResult("done", unreported[0].id, self.running())
            targets = [t for t in self._tasks.values() if not t.done]
            if not targets:
                return WaitResult("idle", None, [])

        await wait_for_any({t.finished for t in targets}, timeout_s, interrupted)
        finished = [t for t in targets if t.done]
        if finished:  # a finished task is the more useful news, even if input is also pending
            finished[0].reported = True
            return WaitResult("done", finished[0].id, self.running())
        if interrupted is not None and interrupted.is_set():
            return WaitResult("interrupted", task_id, self.running())
        return WaitResult("timeout", task_id, self.running())


# --- tools ---


def _background(ctx: ToolContext) -> BackgroundTasks:
    if not isinstance(ctx.background, BackgroundTasks):  # none, or only a starter (a test's)
        raise ToolError("background tasks are not available in this session")
    return ctx.background


def _wait_timeout(args: dict[str, Any]) -> float:
    value = args.get("timeout")
    if value is None:
        return DEFAULT_WAIT
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ToolError(f"argument 'timeout' must be a number of seconds, got {value!r}")
    if value < 0:
        raise ToolError(f"argument 'timeout' must not be negative, got {value}")
    return min(float(value), MAX_WAIT)


def _task_id_arg(args: dict[str, Any]) -> str | None:
    value = args.get("task_id")
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ToolError(f"argument 'task_id' must be a string, got {value!r}")
    return value


def _report(bg: BackgroundTasks, task_id: str) -> tuple[str, dict[str, Any]]:
    """The task's output so far and its status line, plus raw output for clients."""
    text, done, rc = bg.output(task_id)
    body = text.rstrip("\n") or ("(no output)" if done else "(no output yet)")
    raw: dict[str, Any] = {"taskId": task_id, "done": done, "exitCode": rc}
    notes = bg.notes(task_id) if done else []  # where the full output is, once it is complete
    return "\n".join([body, *notes, f"[{bg.status(task_id)}]"]), raw


def _still_running(result: WaitResult) -> str:
    if result.task_id is not None:
        return f"task {result.task_id} is still running"
    if result.running:
        return f"still running: {', '.join(result.running)}"
    return "no background tasks are running"


async def _agent_output(
    agents: AgentTasks, task_id: str, args: dict[str, Any], interrupted: asyncio.Event | None
) -> ToolResult:
    reason = (
        await agents.wait(task_id, _wait_timeout(args), interrupted) if args.get("wait") is True else None
    )
    output, raw = agents.report(task_id)
    if reason is not None:
        raw["reason"] = reason
    prefix = f"{INTERRUPTED_TEXT}; output so far:\n" if reason == "interrupted" else ""
    return ToolResult(output=prefix + output, raw_output=raw)


class TaskOutput:
    name: ClassVar[str] = "task_output"
    kind: ClassVar[ToolKind] = ToolKind.OTHER
    access: ClassVar[Access] = Access.READ
    description: ClassVar[str] = (
        "Show a background task's output so far and whether it is still running; optionally wait."
    )
    guidance: ClassVar[str] = (
        "Use task_output to check on a command started with bash run_in_background (or an agent started "
        "with task run_in_background): it shows the "
        "output so far (long output keeps its beginning and end) followed by the status, running or "
        "the exit code. With wait=true it first waits for the task to finish, for at most timeout "
        f"seconds (default {DEFAULT_WAIT:g}, max {MAX_WAIT:g}), and like wait it returns early with "
        f'"{INTERRUPTED_TEXT}" when the user sends a message.'
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "task_id": {"type": "string", "minLength": 1, "description": "The background task's id."},
            "wait": {"type": "boolean", "description": "Wait for the task to finish first (default false)."},
            "timeout": {
                "type": "number",
                "minimum": 0,
                "maximum": MAX_WAIT,
                "description": f"With wait: seconds to wait at most (default {DEFAULT_WAIT:g}).",
            },
        },
        "required": ["task_id"],
        "additionalProperties": False,
    }

    def title(self, args: dict[str, Any]) -> str:
        return f"Output of {args.get('task_id', '?')}"

    def locations(self, args: dict[str, Any], ctx: ToolContext) -> list[dict[str, Any]]:
        return []

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        task_id = _task_id_arg(args)
        if task_id is None:
            raise ToolError("missing required argument 'task_id'")
        if ctx.agents is not None and ctx.agents.knows(task_id):  # a background sub-agent (R-T11)
            return await _agent_output(ctx.agents, task_id, args, ctx.interrupted)
        bg = _background(ctx)
        if task_id not in bg.ids() and bg.earlier.knows(task_id):  # before a restart: its end
            output, raw = bg.earlier.report(task_id)
            return ToolResult(output=output, raw_output=raw)
        bg._get(task_id)  # unknown id: a readable error before any waiting
        do_wait = args.get("wait", False)
        if do_wait is None:
            do_wait = False
        if not isinstance(do_wait, bool):
            raise ToolError(f"argument 'wait' must be true or false, got {do_wait!r}")
        prefix = ""
        reason: str | None = None
        if do_wait:
            result = await bg.wait(task_id, _wait_timeout(args), ctx.interrupted)
            reason = result.reason
            if result.reason == "interrupted":
                prefix = f"{INTERRUPTED_TEXT}; output so far:\n"
        output, raw = _report(bg, task_id)
        if reason is not None:
            raw["reason"] = reason
        return ToolResult(output=prefix + output, raw_output=raw)

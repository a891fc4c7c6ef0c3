"""The `bash` tool (R-T5): one shell command in the workspace, in its own process group.

Lifecycle of a call:
- `/bin/bash -c COMMAND` starts in a new session (so it leads its own process group), with
  the workspace as cwd, stdin from /dev/null and stderr merged into stdout.
- Output is collected with a cap (head and tail kept, middle dropped with a marker) and
  streamed via `ctx.report_progress` at most every `PROGRESS_INTERVAL` seconds; each report
  carries the whole (capped) output so far, matching ACP's replace-content semantics.
- When bash exits, whatever is still running in its group (e.g. `cmd &`) is killed after a
  short drain, so a call never leaks processes (background work belongs to task tools).
  Processes that left the group (`setsid`) are found by an environment tag and killed
  too (`agentd.tools.shell.proctrack`).
- Timeout: SIGTERM to the group, SIGKILL after `KILL_GRACE`; an error result with the
  output so far. Cancellation (the user cancelled the turn): SIGKILL to the group, then
  CancelledError propagates.
- A non-zero exit status is information, not a tool failure: `is_error=False`, the output
  ends with `[exit code N]` and `raw_output["exitCode"]` holds N.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import os
import signal
from collections.abc import Awaitable, Callable
from enum import StrEnum
from pathlib import Path
from typing import Any, ClassVar

from agentd.tools.base import Access, ToolContext, ToolKind, ToolResult
from agentd.tools.errors import ToolError
from agentd.tools.files import ToolPreview
from agentd.tools.shell.launch import Launch, ShellLauncher
from agentd.tools.shell.output import CappedOutput as _CappedOutput
from agentd.tools.shell.output import ShellOutput
from agentd.tools.shell.proctrack import kill_all, kill_all_now, new_tag, signal_all
from agentd.tools.shell.spill import Spill

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 120.0
MAX_TIMEOUT = 600.0
OUTPUT_CAP = 30_000  # characters the model sees
PROGRESS_INTERVAL = 0.25
KILL_GRACE = 2.0  # SIGTERM -> SIGKILL on timeout
DRAIN_GRACE = 0.5  # after bash exits, time for leftover output before the group is killed
SPILL_THRESHOLD = 4 * OUTPUT_CAP  # bytes: more than this many cannot fit in OUTPUT_CAP characters


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    # The group may already be gone (everything exited); that is the goal, not an error.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


class _ShellProtocol(asyncio.SubprocessProtocol):
    """Collects output and reports the shell's exit, the pipe's EOF and too much output
    separately.

    Used instead of `asyncio.subprocess.Process` because on Python 3.11 `Process.wait()`
    returns only once every pipe is closed, so a background grandchild holding stdout
    would keep it waiting long after the shell itself exited.
    """

    def __init__(self, out: ShellOutput) -> None:
        loop = asyncio.get_running_loop()
        self.out = out
        self.exited: asyncio.Future[None] = loop.create_future()
        self.eof: asyncio.Future[None] = loop.create_future()
        self.overflow: asyncio.Future[None] = loop.create_future()  # output passed its limit
        out.on_limit = self._overflowed

    def _overflowed(self) -> None:
        if not self.overflow.done():
            self.overflow.set_result(None)

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        self.out.feed(data.encode() if isinstance(data, str) else data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if not self.eof.done():  # only stdout is a pipe (stderr is merged into it)
            self.out.finish()
            self.eof.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)


def new_output(cwd: Path, shell: ShellLauncher) -> ShellOutput:
    """The output collector of one command: head and tail for the model, the rest in a log."""
    return ShellOutput(OUTPUT_CAP, spill=Spill(cwd, threshold=SPILL_THRESHOLD), limit=shell.output_limit)


async def spawn_shell(
    out: ShellOutput, launch: Launch, cwd: Path
) -> tuple[asyncio.SubprocessTransport, _ShellProtocol]:
    """Start a prepared command in its own session, output into `out`."""
    return await asyncio.get_running_loop().subprocess_exec(
        lambda: _ShellProtocol(out),
        *launch.argv,
        cwd=cwd,
        env=launch.env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,  # own process group: one killpg reaches every descendant
    )


class Stopped(StrEnum):
    """Why a command was ended before it finished by itself."""

    TIMEOUT = "timeout"
    OUTPUT = "output"  # it printed more than the output limit


async def run_to_end(
    transport: asyncio.SubprocessTransport, proto: _ShellProtocol, tag: str, limit_s: float | None
) -> Stopped | None:
    """Wait for the command (time limit, output limit), then end whatever it left behind."""
    stopped: Stopped | None = None
    # asyncio.wait rather than wait_for: a timeout must not cancel the `exited` future.
    await asyncio.wait({proto.exited, proto.overflow}, timeout=limit_s, return_when=asyncio.FIRST_COMPLETED)
    if not proto.exited.done():
        stopped = Stopped.OUTPUT if proto.overflow.done() else Stopped.TIMEOUT
        await _terminate_group(transport.get_pid(), proto.exited, tag)
    # The shell is gone, but background children may still hold the pipe open: give them a
    # moment to flush, then end the rest of the group so EOF arrives.
    done, _ = await asyncio.wait({proto.eof}, timeout=DRAIN_GRACE)
    await end_command(transport, tag)
    if not done:
        await asyncio.wait({proto.eof}, timeout=KILL_GRACE)
    return stopped


_Spawn = asyncio.Future[tuple[asyncio.SubprocessTransport, _ShellProtocol]]


def _kill_spawned(fut: _Spawn, tag: str | None = None) -> None:
    """Done-callback for a spawn whose caller was cancelled: kill what it started."""
    if not fut.cancelled() and fut.exception() is None:
        transport, _ = fut.result()
        if tag is None:
            _signal_group(transport.get_pid(), signal.SIGKILL)
        else:
            kill_all_now(transport.get_pid(), tag, root_alive=transport.get_returncode() is None)
        transport.close()


def kill_spawned_callback(tag: str) -> Callable[[_Spawn], None]:
    return functools.partial(_kill_spawned, tag=tag)


async def end_command(transport: asyncio.SubprocessTransport, tag: str) -> None:
    """SIGKILL the shell's group and every process carrying its tag."""
    await kill_all(transport.get_pid(), tag, root_alive=transport.get_returncode() is None)


def end_command_now(transport: asyncio.SubprocessTransport, tag: str) -> None:
    """As `end_command`, for a path that must not wait (cancellation)."""
    kill_all_now(transport.get_pid(), tag, root_alive=transport.get_returncode() is None)


async def _report_loop(out: _CappedOutput, report: Callable[[str], Awaitable[None]]) -> None:
    # A ticker rather than reporting per chunk: it bounds the rate, still delivers the last
    # output of a command that went quiet, and a slow client never stalls output collection.
    sent = 0
    while True:
        await asyncio.sleep(PROGRESS_INTERVAL)
        if out.total != sent:
            sent = out.total
            try:
                await report(out.render())
            except Exception:  # progress is best effort; the final result carries everything
                log.warning("bash progress report failed", exc_info=True)


async def _terminate_group(pid: int, exited: asyncio.Future[None], tag: str) -> None:
    await signal_all(pid, tag, signal.SIGTERM, root_alive=not exited.done())
    await asyncio.wait({exited}, timeout=KILL_GRACE)
    # Unconditional: children that ignore SIGTERM must not outlive a bash that obeyed it.
    await kill_all(pid, tag, root_alive=not exited.done())
    # Bounded: a process stuck in uninterruptible I/O must not hang the turn.
    await asyncio.wait({exited}, timeout=KILL_GRACE)


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:  # real-time signals have no enum member
        return f"signal {num}"


async def _in_client_terminal(command: str, ctx: ToolContext, limit_s: float) -> ToolResult:
    """The command runs in the editor's terminal (R-T6), with the same result shape."""
    assert ctx.client is not None
    embedded: list[dict[str, Any]] = []

    async def show(terminal_id: str) -> None:
        embedded.append({"type": "terminal", "terminalId": terminal_id})
        if ctx.report_content is not None:
            await ctx.report_content(embedded)

    text, rc, timed_out = await ctx.client.run_command(
        command, ctx.cwd, limit_s, OUTPUT_CAP * 4, on_terminal=show
    )
    capped = _CappedOutput(OUTPUT_CAP)
    capped.add(text)
    body = capped.render().rstrip("\n") or "(no output)"
    raw: dict[str, Any] = {"exitCode": rc, "terminal": "client"}
    if timed_out:
        raw["timedOut"] = True
        return ToolResult(
            output=f"{body}\n[timed out after {limit_s:g} s; the command was killed]",
            is_error=True,
            content=embedded,
            raw_output=raw,
        )
    if rc:
        body += f"\n[exit code {rc}]"
    return ToolResult(output=body, content=embedded, raw_output=raw)


def _parse_timeout(args: dict[str, Any]) -> float:
    value = args.get("timeout")
    if value is None:
        return DEFAULT_TIMEOUT
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ToolError(f"argument 'timeout' must be a number of seconds, got {value!r}")
    if value <= 0:
        raise ToolError(f"argument 'timeout' must be positive, got {value}")
    return min(float(value), MAX_TIMEOUT)


class Bash:
    """`shell`: how commands start (the sandbox chosen at start-up); unconfined by default."""

    name: ClassVar[str] = "bash"
    kind: ClassVar[ToolKind] = ToolKind.EXECUTE
    access: ClassVar[Access] = Access.EXECUTE
    description: ClassVar[str] = (
        "Run a shell command with /bin/bash in the workspace; returns merged stdout/stderr."
    )
    guidance: ClassVar[str] = (
        "Use bash to run commands in the workspace (builds, tests, git, grep/find), one `/bin/bash -c` "
        "call per use with the workspace root as working directory, no stdin, and stdout and stderr "
        f"merged. Commands time out after {DEFAULT_TIMEOUT:g} s unless you pass timeout (at most "
        f"{MAX_TIMEOUT:g}); long output keeps its beginning and end. A non-zero exit status is shown as "
        "`[exit code N]` after the output, and processes still running when the command ends are "
        "stopped, so do not start servers with `&`: pass run_in_background=true instead, which returns a "
        "task id at once (no timeout unless you give one) for task_output and wait. To read or change "
        "files prefer the file tools."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "command": {"type": "string", "minLength": 1, "description": "The shell command to run."},
            "timeout": {
                "type": "number",
                "exclusiveMinimum": 0,
                "maximum": MAX_TIMEOUT,
                "description": f"Timeout in seconds (default {DEFAULT_TIMEOUT:g}, max {MAX_TIMEOUT:g}).",
            },
            "run_in_background": {
                "type": "boolean",
                "description": "Start the command as a background task and return its id at once.",
            },
        },
        "required": ["command"],
        "additionalProperties": False,
    }

    def __init__(self, shell: ShellLauncher | None = None) -> None:
        self.shell = shell or ShellLauncher()

    def title(self, args: dict[str, Any]) -> str:
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            return "Run command"
        first = command.strip().splitlines()[0]
        more = len(first) > 80 or "\n" in command.strip()
        suffix = " in the background" if args.get("run_in_background") is True else ""
        return f"Run `{first[:80]}{' …' if more else ''}`{suffix}"

    def locations(self, args: dict[str, Any], ctx: ToolContext) -> list[dict[str, Any]]:
        return []  # a command's paths can't be known without running it

    async def preview(self, args: dict[str, Any], ctx: ToolContext) -> ToolPreview:
        """The exact command and the directory it runs in (the workspace root)."""
        meta: dict[str, Any] = {"command": args.get("command"), "cwd": str(ctx.cwd)}
        if args.get("run_in_background") is True:
            meta["background"] = True
        return ToolPreview(meta=meta)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ToolError("argument 'command' must be a non-empty string")
        timeout = _parse_timeout(args)
        background = args.get("run_in_background", False)
        if background is not None and not isinstance(background, bool):
            raise ToolError(f"argument 'run_in_background' must be true or false, got {background!r}")
        if background:
            if ctx.background is None:
                raise ToolError(
                    "background tasks are not available in this session; run it without run_in_background"
                )
            # A background task has no timeout unless one was given explicitly.
            task_id = ctx.background.start(
                command, ctx.cwd, timeout if args.get("timeout") is not None else None, shell=self.shell
            )
            return ToolResult(output=f"started background task {task_id}", raw_output={"taskId": task_id})
        if ctx.client is not None and ctx.client.can_terminal:
            return await _in_client_terminal(command, ctx, timeout)

        tag = new_tag()
        launch = self.shell.prepare(command, ctx.cwd, tag)
        out = new_output(ctx.cwd, self.shell)
        spawn: _Spawn = asyncio.ensure_future(spawn_shell(out, launch, ctx.cwd))
        try:
            # Shielded so a cancel during the spawn can't leave a started bash without a handle.
            transport, proto = await asyncio.shield(spawn)
        except asyncio.CancelledError:
            spawn.add_done_callback(kill_spawned_callback(tag))
            raise
        except OSError as exc:
            launch.release()
            raise ToolError(f"cannot start /bin/bash in {ctx.cwd}: {exc}") from None

        reporter = (
            asyncio.create_task(_report_loop(out, ctx.report_progress))
            if ctx.report_progress is not None
            else None
        )
        try:
            stopped = await run_to_end(transport, proto, tag, timeout)
        except BaseException:
            # Cancellation (or anything unexpected): nothing of the command may survive.
            end_command_now(transport, tag)
            raise
        finally:
            if reporter is not None:
                reporter.cancel()
            transport.close()  # releases the pipe; would also kill bash were it still running
            out.finish()
            launch.release()
        return shell_result(out, transport.get_returncode(), stopped, timeout)


def shell_result(
    out: ShellOutput, rc: int | None, stopped: Stopped | None, timeout: float | None
) -> ToolResult:
    """What the model sees of a finished command: output, notes, and how it ended."""
    body = "\n".join([out.render().rstrip("\n") or "(no output)", *out.notes()])
    raw: dict[str, Any] = {"exitCode": rc, "truncated": out.truncated}
    if out.spill is not None and out.spill.path is not None:
        raw["outputFile"] = out.spill.path.as_posix()
    if stopped is Stopped.TIMEOUT:
        raw["timedOut"] = True
        return ToolResult(
            output=f"{body}\n[timed out after {timeout:g} s; the command and its processes were killed]",
            is_error=True,
            raw_output=raw,
        )
    if stopped is Stopped.OUTPUT:
        raw["outputLimit"] = True
        return ToolResult(output=body, is_error=True, raw_output=raw)
    if rc is not None and rc < 0:  # bash itself died from a signal (e.g. an external kill)
        raw["exitCode"] = None
        raw["signal"] = _signal_name(-rc)
        body += f"\n[terminated by signal {raw['signal']}]"
    elif rc:
        body += f"\n[exit code {rc}]"
    return ToolResult(output=body, raw_output=raw)

"""File and shell access through the prompting ACP client (R-T6).

An editor that advertises `fs.readTextFile` / `fs.writeTextFile` / `terminal` gets the
agent's reads, writes and commands: the agent then sees unsaved buffers and the user sees
the commands in the editor's terminal. Paths are confined to the workspace before they
are sent, exactly as for local access; permissions are asked as always.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentd.protocol import ClientRequest, ErrorCode, Outgoing, RpcError, outgoing
from agentd.tools.errors import ToolError

Request = Callable[[str, dict[str, Any]], Awaitable[Any]]
# Told the terminal's id as soon as it exists, so the tool call can embed it (live output).
OnTerminal = Callable[[str], Awaitable[None]]


class ClientFileMissing(ToolError):
    """The client answered `-32002` (resource not found) for a file."""


@dataclass(frozen=True)
class PriorText:
    """A file's text before a write through the client: None for a new file, or when the
    client could not read it (`unreadable` says what it answered)."""

    text: str | None
    unreadable: str | None = None


@dataclass
class ClientBridge:
    request: Request
    session_id: str
    can_read: bool = False
    can_write: bool = False
    can_terminal: bool = False

    async def _call(self, call: Outgoing) -> Any:
        try:
            return await self.request(call.method, call.params)
        except RpcError as exc:
            if exc.code == ErrorCode.RESOURCE_NOT_FOUND:
                raise ClientFileMissing(f"the client has no {call.params.get('path', 'such file')}") from None
            raise ToolError(f"the client could not {call.method}: {exc}") from None
        except Exception as exc:  # the client refused or went away: the model reads why
            raise ToolError(f"the client could not {call.method}: {exc}") from None

    def _terminal(self, method: ClientRequest, terminal_id: str) -> Outgoing:
        return outgoing.terminal_call(method, self.session_id, terminal_id)

    async def read_text_file(self, path: Path) -> str:
        result = await self._call(outgoing.read_text_file(self.session_id, str(path)))
        content = result.get("content") if isinstance(result, dict) else None
        if not isinstance(content, str):
            raise ToolError("the client answered fs/read_text_file without content")
        return content

    async def read_existing(self, path: Path) -> PriorText:
        """What a write would replace. A client that says the file does not exist (-32002)
        means a new file; any other error of this pre-read (acpx answers a missing file
        `-32603 … ENOENT`, a client without the method `-32601`) means no known old content:
        the write still goes ahead, and says why it knows nothing of the old text."""
        try:
            return PriorText(await self.read_text_file(path))
        except ClientFileMissing:
            return PriorText(None)
        except ToolError as exc:
            return PriorText(None, unreadable=str(exc))

    async def write_text_file(self, path: Path, content: str) -> None:
        await self._call(outgoing.write_text_file(self.session_id, str(path), content))

    async def run_command(
        self,
        command: str,
        cwd: Path,
        limit_s: float,
        output_limit: int,
        on_terminal: OnTerminal | None = None,
    ) -> tuple[str, int | None, bool]:
        """Run `command` in the client's terminal; (output, exit code or None, timed out)."""
        created = await self._call(
            outgoing.create_terminal(self.session_id, "/bin/bash", ["-c", command], str(cwd), output_limit)
        )
        terminal = created["terminalId"]  # sent back as the client spelled it
        timed_out = False
        try:
            if on_terminal is not None:  # the editor shows its live output in the tool call
                await on_terminal(str(terminal))
            try:
                async with asyncio.timeout(limit_s):
                    await self._call(self._terminal(ClientRequest.TERMINAL_WAIT_FOR_EXIT, terminal))
            except TimeoutError:
                timed_out = True
                await self._call(self._terminal(ClientRequest.TERMINAL_KILL, terminal))
            out = await self._call(self._terminal(ClientRequest.TERMINAL_OUTPUT, terminal))
        finally:
            with contextlib.suppress(Exception):  # cancelled or not, the client frees it
                await asyncio.shield(self._call(self._terminal(ClientRequest.TERMINAL_RELEASE, terminal)))
        status = out.get("exitStatus") or {}
        return str(out.get("output", "")), status.get("exitCode"), timed_out

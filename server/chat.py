"""`agentd chat`: a terminal client over the WebSocket (R-O).

Type a prompt and watch the agent work: its text streams, tool calls show as they start
and finish, and permission requests are asked right here (y = allow once, a = always,
n = reject). While a turn runs, a line you type goes into that turn (`_agentd/interject`)
and `/cancel` stops it. `/quit` or end of input leaves; the session stays on the server
(`agentd chat --session ID` comes back to it).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import websockets
from rich.console import Console
from rich.text import Text

from protocol.methods import ClientRequest, Notification, Served
from server.terminal import Screen

console = Console(highlight=False, soft_wrap=True)
screen = Screen(console)

ANSWERS = {"y": "allow_once", "yes": "allow_once", "a": "allow_always", "always": "allow_always",
           "n": "reject_once", "no": "reject_once"}  # fmt: skip


def show_update(update: dict[str, Any]) -> None:
    """One `session/update`, rendered for a terminal (shared with `agentd demo`)."""
    screen.update(update)


class ChatClient:
    """Routes the server's messages: responses to their callers, updates to the screen,
    permission requests to the user."""

    def __init__(self, ws: Any, session_id: str = "") -> None:
        self.ws = ws
        self.session_id = session_id
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.permission: asyncio.Future[str] | None = None  # a line from the user answers it
        self._asking: set[asyncio.Task[None]] = set()

    async def send(self, message: dict[str, Any]) -> None:
        await self.ws.send(json.dumps({"jsonrpc": "2.0", **message}))

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        req_id = next(self._ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[req_id] = fut
        await self.send({"id": req_id, "method": method, "params": params})
        msg = await fut
        if "error" in msg:
            raise ChatError(f"{method}: {msg['error'].get('message')}")
        result: dict[str, Any] = msg["result"]
        return result

    async def read(self) -> None:
        async for text in self.ws:
            msg = json.loads(text)
            if "method" not in msg:
                fut = self._pending.pop(msg.get("id"), None)
                if fut is not None and not fut.done():
                    fut.set_result(msg)
            elif msg["method"] == ClientRequest.REQUEST_PERMISSION and "id" in msg:
                task = asyncio.create_task(self._ask_permission(msg))
                self._asking.add(task)
                task.add_done_callback(self._asking.discard)
            elif msg["method"] == Notification.SESSION_UPDATE:
                show_update(msg["params"]["update"])
            elif msg["method"] == Notification.PERMISSION_RESOLVED and self.permission is not None:
                if not self.permission.done():  # another client answered first
                    self.permission.set_result("")
            elif msg["method"] == Notification.EVENT and msg["params"]["kind"] == "turn_ended":
                ev = msg["params"]["event"]
                screen.line(f"turn ended: {ev['outcome']} ({ev['stopReason']})", style="dim")
            sys.stdout.flush()
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(ChatError("the server closed the connection"))

    async def _ask_permission(self, msg: dict[str, Any]) -> None:
        call = msg["params"]["toolCall"]
        title = str(call.get("title") or call.get("toolCallId") or "this tool call")
        while True:
            screen.line(Text.assemble(("? allow ", "yellow"), (title, "yellow"), ("? ", "yellow")))
            # Text, not markup: "[y]" would be swallowed as a style tag.
            console.print(Text("[y]es once / [a]lways / [n]o: "), end="")
            sys.stdout.flush()
            self.permission = asyncio.get_running_loop().create_future()
            answer = (await self.permission).strip().lower()
            self.permission = None
            if not answer:
                return  # settled elsewhere
            option = ANSWERS.get(answer)
            if option is not None:
                break
            screen.line(f"please answer y, a or n (not {answer!r})", style="red")
        await self.send({"id": msg["id"], "result": {"outcome": {"outcome": "selected", "optionId": option}}})


class ChatError(Exception):
    pass


def read_lines(queue: asyncio.Queue[str | None], readline: Callable[[], str]) -> None:
    """stdin, line by line, into `queue` (None at end of input). A daemon thread, not the
    loop's executor: a read blocked on the terminal must not keep the program alive."""
    loop = asyncio.get_running_loop()

    def pump() -> None:
        while True:
            line = readline()
            loop.call_soon_threadsafe(queue.put_nowait, line.rstrip("\n") if line else None)
            if not line:
                return

    threading.Thread(target=pump, name="chat-stdin", daemon=True).start()


async def run_chat(url: str, *, token: str | None, cwd: Path, session_id: str | None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    try:
        ws = await websockets.connect(url, additional_headers=headers, max_size=None)
    except (OSError, websockets.InvalidHandshake) as exc:
        console.print(Text(f"agentd chat: cannot connect to {url}: {exc}", style="red"))
        return 2
    client = ChatClient(ws)
    reader = asyncio.create_task(client.read())
    lines: asyncio.Queue[str | None] = asyncio.Queue()
    read_lines(lines, sys.stdin.readline)
    try:
        init = await client.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        info = init["agentInfo"]
        console.print(Text(f"connected to {info['name']} {info['version']}", style="dim"))
        if session_id:
            await client.call(
                Served.SESSION_LOAD, {"sessionId": session_id, "cwd": str(cwd), "mcpServers": []}
            )
            client.session_id = session_id
        else:
            new = await client.call(Served.SESSION_NEW, {"cwd": str(cwd), "mcpServers": []})
            client.session_id = new["sessionId"]
        screen.line(f"session {client.session_id} — /quit to leave, /cancel stops a turn", style="dim")
        sys.stdout.flush()
        return await _repl(client, lines)
    except ChatError as exc:
        screen.line(f"agentd chat: {exc}", style="red")
        return 1
    finally:
        await ws.close()
        reader.cancel()


async def _repl(client: ChatClient, lines: asyncio.Queue[str | None]) -> int:
    turn: asyncio.Task[dict[str, Any]] | None = None
    eof = False
    while True:
        if eof and turn is None:
            return 0
        get = None if eof else asyncio.create_task(lines.get())
        waits: set[asyncio.Task[Any]] = ({get} if get else set()) | ({turn} if turn else set())
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        if turn is not None and turn.done():
            try:
                result = turn.result()
                screen.line(f"stopReason: {result['stopReason']}", style="dim")
            except ChatError as exc:
                screen.line(str(exc), style="red")
            sys.stdout.flush()
            turn = None
        if get is None or not get.done():
            if get is not None:
                get.cancel()
            continue
        line = get.result()
        if client.permission is not None and not client.permission.done():
            client.permission.set_result(line or "n")  # end of input rejects
            eof = line is None
            continue
        if line is None or line.strip() == "/quit":
            eof = True  # leave once the running turn (if any) has finished
            continue
        if not line.strip():
            continue
        params = {"sessionId": client.session_id, "prompt": [{"type": "text", "text": line}]}
        command = line.strip()
        if command == "/cancel":
            if turn is None:
                screen.line("no turn is running", style="dim")
            else:
                await client.send(
                    {"method": Served.SESSION_CANCEL, "params": {"sessionId": client.session_id}}
                )
        elif turn is None:
            turn = asyncio.create_task(client.call(Served.SESSION_PROMPT, params))
        elif command.startswith(("/", "!")):
            # A local command or a shell line is not words for the running turn: it runs
            # on its own once the turn is over.
            queued = await client.call(Served.ENQUEUE, params)
            screen.line(
                f"queued {command.split()[0]} (position {queued.get('position')}): runs after this turn",
                style="dim",
            )
        else:
            await client.call(Served.INTERJECT, params)

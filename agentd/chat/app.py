"""The chat's state and what the server sends it: updates to the screen, turn and queue
events to the state, permission questions to the user (with what they are about)."""

from __future__ import annotations

import asyncio
import collections
import sys
import uuid
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from agentd.chat.link import ChatError, Link
from agentd.chat.queue import QueueMirror
from agentd.chat.render import ChatScreen, permission_preview
from agentd.protocol import ClientRequest, Notification, QueueOp, Served

console = Console(highlight=False, soft_wrap=True)
screen = ChatScreen(console)

INTERRUPT = "\x03"  # Ctrl-C, as a line or an answer: never typed by a person (the terminal signals it)
MAX_ECHOES = 256  # waiting prompts remembered for their echo
CANCELLED = "cancelled"  # a question left by Ctrl-C: the turn is being cancelled

ANSWERS = {"y": "allow_once", "yes": "allow_once", "a": "allow_always", "always": "allow_always",
           "n": "reject_once", "no": "reject_once"}  # fmt: skip


def show_update(update: dict[str, Any]) -> None:
    """One `session/update`, rendered for a terminal (shared with `agentd demo`)."""
    screen.update(update)


def _meta(params: dict[str, Any]) -> dict[str, Any]:
    meta = (params.get("_meta") or {}).get("agentd")
    return meta if isinstance(meta, dict) else {}


class Chat:
    """One session seen from the terminal."""

    def __init__(self, url: str, token: str | None, cwd: Path) -> None:
        self.link = Link(url, token, self.on_message)
        self.cwd = cwd
        self.session_id = ""
        self.running: str | None = None  # the running turn's id
        self.queue = QueueMirror()
        self.inflight = 0  # prompts sent, not yet acknowledged
        self.waiting: set[str] = set()  # acknowledged prompts of ours not yet started or gone
        self.gone: set[str] = set()  # prompt ids that started or left the queue
        self.sent = collections.Counter[str]()  # our own prompts' text: not echoed back
        self.idle = asyncio.Event()
        self.idle.set()
        self.leaving = False  # end of input: permission questions are rejected
        self.permissions: collections.deque[dict[str, Any]] = collections.deque()
        self.answer: asyncio.Future[str] | None = None  # a line from the user answers it
        self._asking: asyncio.Task[None] | None = None
        # Prompts of ours that did not start at once, by requestId (`turn_started` names it,
        # even when it comes before the answer): shown when they start, as last edited.
        self.echo: dict[str, str] = {}
        self.edited: dict[str, str] = {}  # promptId -> its text after an /edit
        self.interjected_in: str | None = None  # the turn we last sent words into
        self.cancelling = False  # Ctrl-C cancelled the running turn: another one quits

    # ------------------------------------------------------------ state

    def busy(self) -> bool:
        return bool(self.running or len(self.queue) or self.inflight or self.waiting)

    def changed(self) -> None:
        if self.busy():
            self.idle.clear()
        else:
            self.idle.set()

    def started_or_gone(self, prompt_id: str) -> None:
        self.gone.add(prompt_id)
        self.waiting.discard(prompt_id)

    # ------------------------------------------------------------ from the server

    def on_message(self, msg: dict[str, Any]) -> None:
        method, params = msg["method"], msg.get("params") or {}
        if method == ClientRequest.REQUEST_PERMISSION and "id" in msg:
            self.permissions.append(msg)
            if self._asking is None or self._asking.done():
                self._asking = asyncio.create_task(self._ask_permissions())
        elif method == Notification.SESSION_UPDATE:
            self._update(params["update"])
        elif method == Notification.PERMISSION_RESOLVED:
            self._resolved(str(params.get("requestId", "")))
        elif method == Notification.EVENT:
            self._event(str(params.get("kind")), params.get("event") or {})
        sys.stdout.flush()

    def _update(self, update: dict[str, Any]) -> None:
        if update.get("sessionUpdate") == "user_message_chunk":
            text = str((update.get("content") or {}).get("text", ""))
            if self.sent[text] > 0:  # our own prompt, replayed after a reconnect
                self.sent[text] -= 1
                return
        screen.update(update)

    def _event(self, kind: str, event: dict[str, Any]) -> None:
        if kind == "turn_started":
            self.running = str(event.get("turnId"))
            if self.cancelling:  # Ctrl-C came between our prompt going out and its turn starting
                self.link.notify(Served.SESSION_CANCEL, self.params())
            self.started_or_gone(str(event.get("promptId")))
            waited = self.echo.pop(str(event.get("requestId")), None)
            edited = self.edited.pop(str(event.get("promptId")), None)
            if waited is not None:
                waited = edited or waited  # typed earlier, scrolled away since: say what runs now
                screen.line(Text.assemble(("> ", "bold"), (waited, "bold"), ("  (from the queue)", "dim")))
            if event.get("source") == "task_notification":  # not ours: a finished background task
                screen.line("a background task finished; the agent takes it up", style="dim")
        elif kind == "turn_ended":
            self.running = None
            self.cancelling = False
            style = "dim" if event.get("outcome") == "completed" else "red"
            screen.line(
                f"turn ended: {event.get('outcome')} (stopReason: {event.get('stopReason')})", style=style
            )
            error = event.get("error")
            if error:
                screen.line(
                    f"  {error.get('message', error) if isinstance(error, dict) else error}", style="red"
                )
        elif kind in ("agent_message", "agent_thought"):
            screen.end_message()
        elif kind == "queue_update":
            for prompt_id in self.queue.apply(event.get("changes") or []):
                self.started_or_gone(prompt_id)
        elif kind == "notice":
            screen.line(Text(f"! {event.get('title', '')}", style="yellow"))
        self.changed()

    # ------------------------------------------------------------ permission questions

    def _resolved(self, request_id: str) -> None:
        """Settled elsewhere (another client, a cancel): drop the question."""
        current = self.permissions[0] if self.permissions else None
        for msg in list(self.permissions):
            if _meta(msg["params"]).get("requestId") == request_id:
                if msg is current and self.answer is not None and not self.answer.done():
                    self.answer.set_result("")
                else:
                    self.permissions.remove(msg)

    async def _ask_permissions(self) -> None:
        while self.permissions:
            msg = self.permissions[0]
            option = await self._ask(msg["params"]["toolCall"])
            if self.permissions and self.permissions[0] is msg:
                self.permissions.popleft()
            if option == CANCELLED:
                self.link.respond(msg["id"], {"outcome": {"outcome": "cancelled"}})
            elif option is not None:
                self.link.respond(msg["id"], {"outcome": {"outcome": "selected", "optionId": option}})

    async def _ask(self, call: dict[str, Any]) -> str | None:
        title = str(call.get("title") or call.get("toolCallId") or "this tool call")
        screen.line(Text.assemble(("? allow ", "yellow"), (title, "yellow"), ("? ", "yellow")))
        for part in permission_preview(call, str(self.cwd)):
            screen.show(part)
        while True:
            if self.leaving:
                screen.line("end of input: rejected", style="dim")
                return "reject_once"
            # Text, not markup: "[y]" would be swallowed as a style tag.
            # A line of its own: the answer is typed on the input line below it.
            console.print(Text("[y]es once / [a]lways / [n]o:"))
            sys.stdout.flush()
            self.answer = asyncio.get_running_loop().create_future()
            answer = (await self.answer).strip().lower()
            self.answer = None
            if answer == INTERRUPT:
                screen.line("(cancelled)", style="dim")
                return CANCELLED
            if not answer:
                screen.line("(answered elsewhere)", style="dim")
                return None
            option = ANSWERS.get(answer)
            if option is not None:
                return option
            screen.line(f"please answer y, a or n (not {answer!r})", style="red")

    # ------------------------------------------------------------ to the server

    def params(self, **more: Any) -> dict[str, Any]:
        return {"sessionId": self.session_id, **more}

    async def prompt(self, text: str, *, now: bool = False) -> dict[str, Any]:
        """Queue `text` (it runs at once when nothing else is waiting); `now`: run it next,
        stopping the running turn (`_agentd/prompt/send_now`)."""
        waits = now or self.busy()  # it will not start at once: echoed when it does
        self.inflight += 1
        self.changed()
        self.sent[text] += 1
        more: dict[str, Any] = {"prompt": [{"type": "text", "text": text}]}
        if waits:
            request_id = f"chat_{uuid.uuid4().hex}"
            more["_meta"] = {"agentd": {"requestId": request_id}}
            self.echo[request_id] = text
            while len(self.echo) > MAX_ECHOES:  # dropped prompts never start: forget the oldest
                self.echo.pop(next(iter(self.echo)))
        try:
            method = Served.SEND_NOW if now else Served.ENQUEUE
            answer = await self.link.call(method, self.params(**more))
        except ChatError:
            self.sent[text] -= 1
            raise
        finally:
            self.inflight -= 1
            self.changed()
        prompt_id = str(answer.get("promptId", ""))
        if prompt_id and prompt_id not in self.gone and "stopReason" not in answer:
            self.waiting.add(prompt_id)
        self.changed()
        return answer

    async def queue_op(self, op: QueueOp, **params: Any) -> dict[str, Any]:
        answer = await self.link.call(op.method, self.params(**params))
        if isinstance(answer.get("queue"), list):
            self.queue.replace(answer["queue"])
            present = {e.id for e in self.queue.entries}
            for prompt_id in list(self.waiting):
                if prompt_id not in present and op is not QueueOp.LIST:
                    self.started_or_gone(prompt_id)
        self.changed()
        return answer

    async def cancel(self) -> None:
        self.link.notify(Served.SESSION_CANCEL, self.params())

    def interrupt(self, lines: asyncio.Queue[str | None]) -> None:
        """Ctrl-C: cancel the running turn (a question it asks is answered `cancelled`), or the
        one our prompt just started; with no turn running, or pressed again, quit (`lines`
        gets INTERRUPT)."""
        asking = self.answer is not None and not self.answer.done()
        # Our prompt is sent (or acknowledged) but its turn_started not seen yet: cancel it on start.
        starting = self.inflight > 0 or bool(self.waiting)
        if (self.running is None and not starting and not asking) or self.cancelling:
            lines.put_nowait(INTERRUPT)
            return
        self.cancelling = True
        screen.line("cancelling the turn (Ctrl-C again quits)", style="yellow")
        if asking:
            assert self.answer is not None
            self.answer.set_result(INTERRUPT)
        self.link.notify(Served.SESSION_CANCEL, self.params())
        sys.stdout.flush()

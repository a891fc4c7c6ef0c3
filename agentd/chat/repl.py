"""`agentd chat`'s input: a line is a prompt (queued while a turn runs), or a command —
`/queue`, `/edit N`, `/drop N`, `/now N|text`, `/interject N|text`, `/cancel`, `/help`,
`/quit`. Other `/commands` and `!shell` lines go to the server like prompts."""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.text import Text

from agentd.chat.app import INTERRUPT, Chat, screen
from agentd.chat.editor import stop_editor, terminal_editor
from agentd.chat.link import ChatError
from agentd.protocol import AGENTD_CLIENT, QueueOp, Served

HELP = [
    "a line is a prompt; while a turn runs it waits in the queue",
    "/queue — the waiting prompts, numbered",
    "/edit N — change prompt N (held while you type the new text; an empty line keeps it)",
    "/drop N — remove prompt N",
    "/now N — run prompt N next, stopping the running turn; /now TEXT — the same for new text"
    " (words you interjected that the stopped turn had not read yet run just before it)",
    "/interject TEXT — words into the running turn now; /interject N — prompt N into it",
    "/cancel or Ctrl-C — stop the running turn (Ctrl-C again quits);"
    "  /quit — leave (the session stays on the server)",
]


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
    chat = Chat(url, token, cwd)
    try:
        await chat.link.start()
    except ChatError as exc:
        print(f"agentd: error: {exc}", file=sys.stderr)
        return 2
    lines: asyncio.Queue[str | None] = asyncio.Queue()
    editor = terminal_editor(lines)  # on a terminal: typed input stays under the output
    if editor is None:
        read_lines(lines, sys.stdin.readline)
    try:
        caps: dict[str, Any] = {"session": {"notices": {}}}
        init = await chat.link.call(
            Served.INITIALIZE, {"protocolVersion": 1, "clientCapabilities": caps, "_meta": AGENTD_CLIENT}
        )
        info = init["agentInfo"]
        screen.line(f"connected to {info['name']} {info['version']}", style="dim")
        if session_id:
            chat.session_id = session_id
            # The whole history (the user's own messages too), then live: reconnects go on from here.
            await chat.link.call(Served.ATTACH, {"sessionId": session_id, "afterSeq": 0})
            await chat.queue_op(QueueOp.LIST)
        else:
            new = await chat.link.call(Served.SESSION_NEW, {"cwd": str(cwd), "mcpServers": []})
            chat.session_id = new["sessionId"]
        screen.line(f"session {chat.session_id} — /help for commands, /quit to leave", style="dim")
        sys.stdout.flush()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, chat.interrupt, lines)
        try:
            return await Repl(chat, lines).run()
        finally:
            loop.remove_signal_handler(signal.SIGINT)
    except ChatError as exc:
        screen.line(f"agentd chat: {exc}", style="red")
        return 1
    finally:
        stop_editor(editor)
        await chat.link.close()


class Repl:
    def __init__(self, chat: Chat, lines: asyncio.Queue[str | None]) -> None:
        self.chat = chat
        self.lines = lines

    async def run(self) -> int:
        chat = self.chat
        while True:
            line = await self.lines.get()
            if line == INTERRUPT:  # Ctrl-C with no turn running, or a second one: quit now
                screen.note("interrupted: leaving (the session stays on the server)", style="dim")
                return 130
            if chat.answer is not None and not chat.answer.done():
                chat.answer.set_result(line if line is not None else "n")  # end of input rejects
                if line is not None:
                    continue
            if line is None or line.strip() == "/quit":
                # Leave once what we started has run (queued prompts would run anyway).
                chat.leaving = True
                await chat.idle.wait()
                return 0
            try:
                await self.handle(line.strip())
            except ChatError as exc:
                screen.note(str(exc), style="red")
            sys.stdout.flush()

    async def handle(self, line: str) -> None:
        chat = self.chat
        word, _, rest = line.partition(" ")
        rest = rest.strip()
        if not line:
            return
        if word == "/help":
            for text in HELP:
                screen.note(text, style="dim")
        elif word == "/cancel":
            if chat.running is None:
                screen.note("no turn is running", style="dim")
            else:
                await chat.cancel()
        elif word == "/queue":
            await chat.queue_op(QueueOp.LIST)
            self.show_queue()
        elif word in ("/edit", "/drop") or (word in ("/now", "/interject") and rest.isdigit()):
            await self.on_entry(word, rest)
        elif word == "/interject":
            await self.interject(rest)
        elif word == "/now":
            if not rest:
                screen.note("usage: /now N (a queued prompt) or /now TEXT", style="red")
                return
            after = self.after_interjection()  # before the turn it stops has ended
            await chat.prompt(rest, now=True)
            screen.note(f"runs next{after}", style="dim")
        else:
            busy = chat.running is not None or len(chat.queue) > 0
            answer = await chat.prompt(line)
            if busy and answer.get("position"):
                screen.note(
                    f"queued as #{answer['position']}: runs after this turn"
                    " (/queue, /edit N, /drop N, /now N)",
                    style="dim",
                )

    def show_queue(self) -> None:
        if not len(self.chat.queue):
            screen.note("the queue is empty", style="dim")
            return
        screen.note(f"{len(self.chat.queue)} waiting:", style="dim")
        for text in self.chat.queue.lines():
            screen.note(Text(text))

    async def interject(self, text: str) -> None:
        if not text:
            screen.note("usage: /interject TEXT (or N, a queued prompt)", style="red")
            return
        self.chat.sent[text] += 1
        answer = await self.chat.link.call(
            Served.INTERJECT, self.chat.params(prompt=[{"type": "text", "text": text}])
        )
        if answer.get("status") == "interjected":
            self.chat.interjected_in = str(answer.get("turnId") or self.chat.running)
            screen.note("↳ sent into the running turn", style="dim")
        else:
            screen.note("no turn is running: queued as a prompt", style="dim")

    async def on_entry(self, word: str, rest: str) -> None:
        chat = self.chat
        entry = chat.queue.at(int(rest)) if rest.isdigit() else None
        if entry is None:
            await chat.queue_op(QueueOp.LIST)  # the numbers may have moved: show them again
            entry = chat.queue.at(int(rest)) if rest.isdigit() else None
        if entry is None:
            screen.note(f"{word} N: no prompt #{rest or '?'} in the queue", style="red")
            self.show_queue()
            return
        if word == "/drop":
            done = await chat.queue_op(QueueOp.REMOVE, id=entry.id, expectedVersion=entry.version)
            self.report(done, f"dropped #{rest}: {entry.text}")
        elif word == "/interject":
            done = await chat.queue_op(QueueOp.INTERJECT, id=entry.id)
            if done.get("applied"):
                chat.interjected_in = chat.running
            self.report(done, f"#{rest} went into the running turn")
        elif word == "/now":
            after = self.after_interjection()  # before the turn it stops has ended
            done = await chat.queue_op(QueueOp.REMOVE, id=entry.id, expectedVersion=entry.version)
            if self.report(done, None):
                await chat.prompt(entry.text, now=True)
                screen.note(f"#{rest} runs next{after}", style="dim")
        else:
            await self.edit(entry.id, rest)

    async def edit(self, entry_id: str, number: str) -> None:
        """Hold the entry (it cannot start while being edited), ask for the new text, edit
        it with its version (a change made meanwhile wins: ours is refused), release it."""
        chat = self.chat
        held = await chat.queue_op(QueueOp.HOLD, id=entry_id)
        if not self.report(held, None):
            return
        entry = next((e for e in chat.queue.entries if e.id == entry_id), None)
        try:
            if entry is None:
                screen.note(f"#{number} is no longer queued", style="red")
                return
            screen.note(Text.assemble((f"editing #{number} (held): ", "dim"), entry.text))
            screen.note("new text (an empty line keeps it):", style="dim")
            sys.stdout.flush()
            new = await self.lines.get()
            if new is None or new == INTERRUPT or not new.strip():
                screen.note("unchanged", style="dim")
                return
            done = await chat.queue_op(
                QueueOp.EDIT, id=entry_id, text=new.strip(), expectedVersion=entry.version
            )
            if self.report(done, f"#{number} is now: {new.strip()}"):
                chat.edited[entry_id] = new.strip()
        finally:
            await chat.queue_op(QueueOp.RELEASE, id=entry_id)

    def after_interjection(self) -> str:
        """What `/now` must say when words we interjected into the stopped turn may be
        unread: the server runs them first, as a prompt of their own."""
        chat = self.chat
        if chat.running is not None and chat.interjected_in == chat.running:
            return " (after your interjection, if the stopped turn had not read it yet)"
        return ""

    @staticmethod
    def report(answer: dict[str, object], done: str | None) -> bool:
        if answer.get("applied"):
            if done:
                screen.note(Text(done, style="dim"))
            return True
        screen.note(f"not changed: {answer.get('reason') or 'the queue changed meanwhile'}", style="red")
        return False

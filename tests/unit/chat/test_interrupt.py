"""Ctrl-C in `agentd chat`: it cancels the turn our prompt starts even when it comes before
that turn's `turn_started` has arrived (the race a fast typist meets), and quits when nothing
of ours runs or is about to."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agentd.chat.app import INTERRUPT, Chat


class RecordingLink:
    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self.sent.append((str(method), params))


def chat_with_link() -> tuple[Chat, RecordingLink]:
    chat = Chat("ws://127.0.0.1:1", None, Path("."))
    link = RecordingLink()
    chat.link = link  # type: ignore[assignment]
    chat.session_id = "sess_1"
    return chat, link


async def test_ctrl_c_before_our_turn_started_cancels_it_when_it_starts() -> None:
    chat, link = chat_with_link()
    lines: asyncio.Queue[str | None] = asyncio.Queue()
    chat.waiting.add("p1")  # acknowledged, its turn_started not seen yet
    chat.interrupt(lines)
    assert lines.empty() and chat.cancelling
    assert [m for m, _ in link.sent] == ["session/cancel"]
    chat.on_message(
        {
            "method": "_agentd/event",
            "params": {"kind": "turn_started", "event": {"turnId": "t1", "promptId": "p1"}},
        }
    )
    # Sent again once the turn exists: the first one may have reached an idle session.
    assert [m for m, _ in link.sent] == ["session/cancel", "session/cancel"]
    chat.interrupt(lines)  # a second Ctrl-C quits
    assert lines.get_nowait() == INTERRUPT


async def test_ctrl_c_with_nothing_of_ours_running_quits() -> None:
    chat, link = chat_with_link()
    lines: asyncio.Queue[str | None] = asyncio.Queue()
    chat.interrupt(lines)
    assert lines.get_nowait() == INTERRUPT and link.sent == []

"""`agentd chat`: a terminal client over the WebSocket (R-O), built only on the server's
public protocol.

Type a prompt and watch the agent work: its answer is rendered as markdown, tool calls show
as they start and finish, permission questions show the diff (or the command and folder)
and are answered here (y = allow once, a = always, n = reject). A line typed while a turn
runs waits in the session's queue (`/queue`, `/edit N`, `/drop N`, `/now N`);
`/interject TEXT` puts words into the running turn; `/cancel` stops it. A dropped
connection is re-established and the session re-attached from the last event seen.
`/quit` or end of input leaves; the session stays on the server (`agentd chat --session
ID` replays it and goes on).
"""

from __future__ import annotations

from agentd.chat.app import ANSWERS, screen, show_update
from agentd.chat.link import ChatError
from agentd.chat.repl import run_chat

__all__ = ["ANSWERS", "ChatError", "run_chat", "screen", "show_update"]

"""How the loop talks to the model on its own behalf (issue 30 item 6).

001: "<system-reminder> 标签会作为某条 user content 里的文本" — every reminder the loop
injects (stationarity and TodoGate nudges, the structured-output retry, the completion
recovery reminder) is `<system-reminder>` text inside a user message, so the model can tell
the harness's voice from the user's.
"""

from __future__ import annotations

OPEN = "<system-reminder>"
CLOSE = "</system-reminder>"


def system_reminder(text: str) -> str:
    """`text` wrapped as a system reminder."""
    return f"{OPEN}\n{text}\n{CLOSE}"


def is_system_reminder(text: str) -> bool:
    return text.startswith(OPEN) and text.endswith(CLOSE)

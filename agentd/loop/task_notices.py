"""Background-task notifications into the running turn (L3 step 2, beside interjections).

"注入一条提醒消息" (000: the loop's remedy when the model would not notice something is to
inject a reminder message): before each sampling round, every background task that finished
since the last round and that the model has not seen through `wait` / `task_output` is
announced once, as one system reminder appended to the conversation (so it is persisted
with it and a restarted session never announces it again). A task that finishes while the
session is idle starts a turn of its own whose first round picks the reminder up here
(`agentd/session/wake.py`, source `task_notification`: 001 counts "后台通知" among a prompt's
sources), unless waking is off or capped — then the next turn's first round does. Tasks that
died with an earlier server process are announced here too (as `interrupted`,
`agentd/core/task_history.py`), through the session's `BackgroundTasks`.
"""

from __future__ import annotations

from agentd.core import Message, TaskCompletion, render_reminder
from agentd.loop.context import TurnContext


def drain_task_notices(ctx: TurnContext) -> list[TaskCompletion]:
    """Append one reminder for the tasks that finished unseen; returns them (maybe none).
    Background shell tasks and background sub-agents (R-T11), which only the session's
    agent hears about (a child has no background of its own). Asked before every sampling
    round: each source answers "none" without building anything (most turns have none)."""
    background, subagents = ctx.background, ctx.subagents
    done = background.take_completions() if background is not None else []
    if subagents is not None and ctx.depth == 0 and (children := subagents.take_completions()):
        done = [*done, *children]
    if done:
        ctx.conversation.append(Message.user(render_reminder(done)))
    return done

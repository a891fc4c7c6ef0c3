"""Background-task notifications into the running turn (L3 step 2, beside interjections).

"注入一条提醒消息" (000: the loop's remedy when the model would not notice something is to
inject a reminder message): before each sampling round, every background task that finished
since the last round and that the model has not seen through `wait` / `task_output` is
announced once, as one system reminder appended to the conversation (so it is persisted
with it and a restarted session never announces it again). A task that finishes while the
session is idle waits for the next turn's first round: a finished shell command starts no
turn of its own (an unattended turn would spend tokens nobody asked for); the session's
clients have already been told by the `background_task` event.

The seed does count a background notification among the inputs that can open a turn (001:
"根据 prompt_id 判断这条输入从哪来（用户、定时任务、后台通知、goal 等）"). Background sub-agents
(R-T11) follow the shell tasks' rule for now: a child that finishes while the session is idle
starts no turn (its clients get the `background_task` event and may prompt); the next turn's
first round picks the reminder up here like any other.
"""

from __future__ import annotations

from server.core.conversation import Message
from server.core.task_notice import CompletionSource, TaskCompletion, render_reminder
from server.loop.context import TurnContext


def _sources(ctx: TurnContext) -> list[CompletionSource]:
    # Background shell tasks and background sub-agents (R-T11), which only the session's
    # agent hears about (a child has no background of its own).
    sources: list[CompletionSource] = [ctx.background] if ctx.background is not None else []
    if ctx.subagents is not None and ctx.depth == 0:
        sources.append(ctx.subagents)
    return sources


def drain_task_notices(ctx: TurnContext) -> list[TaskCompletion]:
    """Append one reminder for the tasks that finished unseen; returns them (maybe none)."""
    done = [c for source in _sources(ctx) for c in source.take_completions()]
    if done:
        ctx.conversation.append(Message.user(render_reminder(done)))
    return done

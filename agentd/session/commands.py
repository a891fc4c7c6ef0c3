"""The session actor's mailbox vocabulary (R-S1). Everything outside the actor changes
session state only by sending one of these."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from agentd.core import PermissionMode
from agentd.protocol import ContentBlock
from agentd.session.sinks import FrameSink

if TYPE_CHECKING:  # the loop and MCP load with the first session (issue 14: idle memory)
    from agentd.core import TurnEnded, TurnOutcome
    from agentd.session.eventlog import Subscriber
    from agentd.tools import McpConnections


@dataclass(frozen=True)
class PromptDone:
    """How a prompt ended, for its `session/prompt` response."""

    prompt_id: str
    turn_id: str | None
    outcome: TurnOutcome
    # The turn's `turn_ended` update as logged, when it was logged for this outcome: the
    # answer is rendered from it, not from a second one built alike (`ended_turn`).
    ended: TurnEnded | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class EnqueueAck:
    """The answer to an enqueue, sent once the prompt is committed: where it waits
    (0 = running now), or how it ended when a repeated requestId names a finished one."""

    prompt_id: str
    position: int | None
    done: PromptDone | None = None


# `Prompt.meta` key set by the replica a routed prompt came through (R-C1): "<replica>/<conn>",
# carried into its `user_message` event so that connection is not sent its own prompt back.
ROUTED_FROM = "routedFrom"


class PromptSource(StrEnum):
    """Where a prompt came from, shown to clients on its `turn_started` (001: "根据 prompt_id
    判断这条输入从哪来（用户、定时任务、后台通知、goal 等）")."""

    USER = "user"  # a client's prompt, enqueue or interjection
    TASK_NOTIFICATION = "task_notification"  # a background task finished while the session was idle


@dataclass
class Prompt:
    blocks: list[ContentBlock]
    reply: asyncio.Future[PromptDone]
    origin: str | None = None  # connection id
    meta: dict[str, Any] = field(default_factory=dict)
    principal: str = "local"
    send_now: bool = False  # run right after the current turn (and cancel it unless a goal is active)
    # Answered once the prompt is durably queued (or started).
    ack: asyncio.Future[EnqueueAck] | None = None
    source: PromptSource = PromptSource.USER


@dataclass
class AttachMcp:
    """Give the session its MCP servers; the reply is the set it had before (to close)."""

    connections: McpConnections
    reply: asyncio.Future[McpConnections | None]


@dataclass
class ResumeQueue:
    """Start the next queued prompt if nothing runs (queued prompts restored after a restart)."""


@dataclass
class QueueOp:
    """One of the queue operations of R-S3 (see agentd/session/queue/ops.py)."""

    op: str  # a `QueueOp` (agentd/protocol/methods.py); anything else is answered unknown
    args: dict[str, Any]
    principal: str
    reply: asyncio.Future[dict[str, Any]]


class InterjectStatus(StrEnum):
    INTERJECTED = "interjected"  # it reached the running turn
    QUEUED = "queued"  # no turn ran: it is the next prompt
    TURN_NOT_ACTIVE = "turn_not_active"  # the turn it named is no longer running


@dataclass(frozen=True)
class InterjectResult:
    status: InterjectStatus
    turn_id: str | None
    prompt_id: str | None = None


@dataclass
class Interject:
    """User input for the *running* turn (R-S4); a prompt when no turn runs."""

    blocks: list[ContentBlock]
    reply: asyncio.Future[InterjectResult]
    expected_turn_id: str | None = None
    origin: str | None = None


@dataclass
class Cancel:
    pass


@dataclass
class GoalSet:
    objective: str
    token_budget: int | None
    verify: str | None
    reply: asyncio.Future[dict[str, Any]]


@dataclass
class GoalGet:
    reply: asyncio.Future[dict[str, Any] | None]


@dataclass
class GoalClear:
    reply: asyncio.Future[dict[str, Any] | None]


@dataclass
class SetAgent:
    name: str
    reply: asyncio.Future[None]


@dataclass
class RegisterHook:
    """A client asks to be consulted as a stop hook (R-L2d)."""

    hook: Any  # a StopHook bound to the client's connection
    reply: asyncio.Future[None]
    events: frozenset[str] = frozenset({"stop"})  # "stop", "subagent_stop", "user_prompt_submit"


@dataclass
class Compact:
    """Fold older history now (idle: as its own queued job; running: before the next request).
    `reply` gets the job's PromptDone when it ran as a job, None when it was scheduled."""

    reply: asyncio.Future[Any]


@dataclass
class Rewind:
    """Files and/or the conversation back to before `turn_id` (R-T12); idle sessions only."""

    turn_id: str
    files: bool
    reply: asyncio.Future[dict[str, Any]]


@dataclass
class RevertFile:
    """One file back to before the session or `turn_id` (issue 33 item 2); idle sessions only."""

    path: str
    turn_id: str | None
    force: bool
    reply: asyncio.Future[dict[str, Any]]


@dataclass
class SetModel:
    model: str
    reply: asyncio.Future[None]


@dataclass
class SetMode:
    mode: PermissionMode
    reply: asyncio.Future[None]


@dataclass
class SetPlan:
    """Turn the plan gate on or off (apart from the permission mode)."""

    on: bool
    reply: asyncio.Future[None]


@dataclass
class SetTitle:
    """Rename the session: stored, and a `session_info_update` to every attached client."""

    title: str
    reply: asyncio.Future[None]


@dataclass
class Attach:
    sink: FrameSink
    reply: asyncio.Future[Subscriber]


@dataclass
class AttachComplete:
    """The attaching client has caught up; send it what waits for an answer."""

    sink: FrameSink
    send_commands: bool = True  # available_commands_update (already sent with a replay)


@dataclass
class Detach:
    sink_id: str


@dataclass
class TaskFinished:
    """A background task of this session finished (announced to clients once); in an idle
    session it may start a turn (agentd/session/wake.py)."""

    task_id: str
    announced: bool = False  # its `background_task` event is already out (a sub-agent's)


@dataclass
class Shutdown:
    grace: float
    reply: asyncio.Future[bool]  # True when the actor stopped
    # Eviction: stop only if still idle with nothing waiting; `on_stop` runs first, in the
    # actor's own step, so no new command can reach it afterwards.
    only_if_idle: bool = False
    on_stop: Callable[[], None] | None = None
    # The whole server is stopping: late prompts end `server_shutting_down` (R-S5).
    server_stopping: bool = False


SessionCommand = (
    Prompt
    | AttachMcp
    | Interject
    | Cancel
    | Compact
    | Rewind
    | RevertFile
    | GoalSet
    | GoalGet
    | GoalClear
    | RegisterHook
    | QueueOp
    | ResumeQueue
    | SetAgent
    | SetModel
    | SetMode
    | SetPlan
    | SetTitle
    | Attach
    | AttachComplete
    | TaskFinished
    | Detach
    | Shutdown
)

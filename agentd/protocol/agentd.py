"""agentd's `_agentd/` extension methods (R-P3): params models. The method names live in
`agentd/protocol/methods.py`; the short aliases below keep the names clients and tests import."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from agentd.protocol.acp import ContentBlock, Wire
from agentd.protocol.methods import QueueOp, Served

INTERJECT = Served.INTERJECT
COMPACT = Served.COMPACT
USAGE_GET = Served.USAGE_GET
MODELS_LIST = Served.MODELS_LIST
GOAL_SET = Served.GOAL_SET
GOAL_GET = Served.GOAL_GET
GOAL_CLEAR = Served.GOAL_CLEAR
HOOKS_REGISTER = Served.HOOKS_REGISTER
ATTACH = Served.ATTACH
DETACH = Served.DETACH
FORK = Served.FORK
SHARE = Served.SHARE
RENAME = Served.RENAME
ENQUEUE = Served.ENQUEUE
SEND_NOW = Served.SEND_NOW
PERMISSION_RESPOND = Served.PERMISSION_RESPOND
QUEUE_OPS: tuple[str, ...] = tuple(op.value for op in QueueOp)


class InterjectParams(Wire):
    session_id: str
    prompt: list[ContentBlock] = Field(min_length=1)
    # Fail with `turn_not_active` unless this turn is still running.
    expected_turn_id: str | None = None


class GoalSetParams(Wire):
    session_id: str
    objective: str = Field(min_length=1, max_length=20_000)
    token_budget: int | None = Field(default=None, ge=1)
    # A shell command run in the workspace when the evaluator thinks the goal is met; exit 0 = done.
    verify: str | None = Field(default=None, min_length=1)


class EnqueueParams(Wire):
    session_id: str
    prompt: list[ContentBlock] = Field(min_length=1)


class QueueOpParams(Wire):
    session_id: str
    id: str | None = None
    expected_version: int | None = None
    text: str | None = Field(default=None, min_length=1)
    order: list[str] | None = None


class ForkParams(Wire):
    session_id: str
    # Copy the history up to and including this seq (default: all of it).
    up_to_seq: int | None = Field(default=None, ge=0)


class AttachParams(Wire):
    session_id: str
    after_seq: int = Field(default=0, ge=0)


class HooksRegisterParams(Wire):
    session_id: str
    events: list[str] = Field(default_factory=lambda: ["stop"])


class PermissionRespondParams(Wire):
    """Answers a pending `session/request_permission` without a WebSocket (e.g. over
    `POST /rpc`, having seen the `permission_requested` event on the SSE stream)."""

    session_id: str
    request_id: str = Field(min_length=1)
    option_id: str | None = Field(default=None, min_length=1)
    # ACP's `RequestPermissionOutcome.outcome`: `cancelled` withdraws the question (the tool
    # call is refused, as when a WebSocket client answers `cancelled`); needs no optionId.
    outcome: Literal["selected", "cancelled"] = "selected"

    @model_validator(mode="after")
    def _option_when_selected(self) -> PermissionRespondParams:
        if self.outcome == "selected" and self.option_id is None:
            raise ValueError("optionId is required unless outcome is 'cancelled'")
        return self


class SessionParams(Wire):
    session_id: str


class ModelsListParams(Wire):
    """`_agentd/models/list`: `refresh` asks the provider now instead of using its cached list."""

    refresh: bool = False


class RewindParams(Wire):
    """`_agentd/session/rewind` (R-T12): back to the state before `turnId`; `files: false`
    rewinds only the conversation."""

    session_id: str
    to_turn_id: str = Field(min_length=1, max_length=64)
    files: bool = True


class ExportParams(Wire):
    """`_agentd/session/export` (issue 33): the session as the JSONL of `agentd session export`;
    `files`: with the workspace's files."""

    session_id: str
    files: bool = False


class ImportParams(Wire):
    """`_agentd/session/import`: a session export (its JSONL text) becomes a session of the
    caller's, working in `cwd` (default: the exported one, if the caller may work there)."""

    jsonl: str = Field(min_length=1)
    cwd: str | None = None


class ChangesParams(Wire):
    """`_agentd/session/changes`: every file the session changed; `since`: from that turn on."""

    session_id: str
    since: str | None = Field(default=None, min_length=1, max_length=64)


class RevertFileParams(Wire):
    """`_agentd/session/revert_file`: one file back to before the session (or `toTurnId`)."""

    session_id: str
    path: str = Field(min_length=1, max_length=4096)
    to_turn_id: str | None = Field(default=None, min_length=1, max_length=64)
    force: bool = False


class ShareParams(Wire):
    """`_agentd/session/share` (R-X2): the owner opens its session to one of its teams —
    `watch` (read), `drive` (also command it) — or closes it again (`none`)."""

    session_id: str
    team: str = Field(min_length=1, max_length=64)
    access: Literal["none", "watch", "drive"]


TITLE_MAX = 200  # characters of a session's title


class RenameParams(Wire):
    """`_agentd/session/rename`: a session's title, shown by `session/list` and the page."""

    session_id: str
    title: str

    @field_validator("title")
    @classmethod
    def _one_printable_line(cls, value: str) -> str:
        title = value.strip()
        if not title:
            raise ValueError("a title is not empty")
        if len(title) > TITLE_MAX:
            raise ValueError(f"a title is at most {TITLE_MAX} characters, not {len(title)}")
        if any(not ch.isprintable() for ch in title):
            raise ValueError("a title is one line of printable characters")
        return title


EVERY_NOTIFICATION = "*"


class OptIn(Wire):
    """What a client asks of agentd's own traffic at `initialize`, in
    `_meta.agentd.notifications`: the `_agentd/` notifications it wants (`["*"]`: all). A
    client that does not ask is a stock ACP client: it gets only the schema's methods and
    update kinds — never an `_agentd/` notification it would have to refuse."""

    notifications: list[str] = Field(default_factory=list)

    @classmethod
    def of(cls, meta: dict[str, object] | None) -> OptIn:
        """From an `initialize`'s `_meta` (a malformed entry asks for nothing)."""
        inner = meta.get("agentd") if isinstance(meta, dict) else None
        if not isinstance(inner, dict):
            return cls()
        try:
            return cls.model_validate(inner)
        except ValueError:
            return cls()

    def wants(self, method: str) -> bool:
        return EVERY_NOTIFICATION in self.notifications or method in self.notifications


# The `_meta` agentd's own clients (web page, chat, demo, bridge) send at `initialize`.
AGENTD_CLIENT: dict[str, object] = {"agentd": {"notifications": [EVERY_NOTIFICATION]}}

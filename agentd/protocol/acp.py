"""Pydantic models of the ACP (protocol version 1) messages agentd speaks.

Field names are snake_case in Python and camelCase on the wire (`alias_generator`);
`dump()` omits nulls, as ACP asks. Incoming params accept unknown keys (ACP is
extensible), outgoing objects carry only what we set.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

# `session/update` payloads are built as plain dicts by these helpers (their home is
# frames.py: the renderer uses them without importing the models), so every producer agrees
# on the camelCase shape.
from agentd.protocol.frames import chunk_update as chunk_update
from agentd.protocol.frames import session_notification as session_notification
from agentd.protocol.frames import text_block as text_block

PROTOCOL_VERSION = 1


class Wire(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    meta: dict[str, Any] | None = Field(default=None, alias="_meta")

    def dump(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


def dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")


# ---------------------------------------------------------------------------- content


class TextContent(Wire):
    type: Literal["text"] = "text"
    text: str


class ImageContent(Wire):
    type: Literal["image"] = "image"
    data: str
    mime_type: str
    uri: str | None = None


class AudioContent(Wire):
    type: Literal["audio"] = "audio"
    data: str
    mime_type: str


class ResourceLink(Wire):
    type: Literal["resource_link"] = "resource_link"
    uri: str
    name: str
    mime_type: str | None = None
    title: str | None = None
    size: int | None = None


class EmbeddedResourceBody(Wire):
    uri: str
    mime_type: str | None = None
    text: str | None = None
    blob: str | None = None


class EmbeddedResource(Wire):
    type: Literal["resource"] = "resource"
    resource: EmbeddedResourceBody


ContentBlock = Annotated[
    TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource,
    Field(discriminator="type"),
]


# ---------------------------------------------------------------------------- initialize


class FileSystemCapabilities(Wire):
    read_text_file: bool = False
    write_text_file: bool = False


class ClientSessionCapabilities(Wire):
    # `{}` advertises support; absent/None means the client does not want these updates.
    compaction: dict[str, Any] | None = None
    notices: dict[str, Any] | None = None


class ClientCapabilities(Wire):
    fs: FileSystemCapabilities = Field(default_factory=FileSystemCapabilities)
    terminal: bool = False
    session: ClientSessionCapabilities | None = None

    def supports_update(self, session_update: str) -> bool:
        """Updates ACP gates behind a client capability go only to clients that asked."""
        if session_update == "compaction_update":
            return self.session is not None and self.session.compaction is not None
        if session_update == "notice":
            return self.session is not None and self.session.notices is not None
        return True


class Implementation(Wire):
    name: str
    version: str
    title: str | None = None


class InitializeParams(Wire):
    protocol_version: int = Field(ge=0, le=65535)
    client_capabilities: ClientCapabilities = Field(default_factory=ClientCapabilities)
    client_info: Implementation | None = None


class AuthenticateParams(Wire):
    method_id: str


# ---------------------------------------------------------------------------- sessions


def _no_nul(path: str | None) -> str | None:
    # No file system takes a NUL in a path; refused here rather than failing deep inside os.*.
    if path is not None and "\x00" in path:
        raise ValueError("cwd must not contain a NUL character")
    return path


def _absolute(path: str) -> str:
    _no_nul(path)
    if not path.startswith("/"):
        raise ValueError("cwd must be an absolute path")
    return path


def _absolute_or_default(path: str) -> str:
    # An empty cwd asks for the caller's default workspace (the server picks and confines it).
    return path if path == "" else _absolute(path)


def _no_additional_directories(value: list[str] | None) -> list[str] | None:
    # Not advertised (sessionCapabilities.additionalDirectories): a session's tools are
    # confined to its one cwd, so extra roots are refused rather than silently ignored.
    if value:
        raise ValueError(
            "additionalDirectories is not supported: a session works inside its cwd only "
            "(not advertised in sessionCapabilities)"
        )
    return value


class NewSessionParams(Wire):
    cwd: str
    mcp_servers: list[dict[str, Any]] = Field(default_factory=list)
    additional_directories: list[str] | None = None

    _check_cwd = field_validator("cwd")(_absolute_or_default)
    _check_dirs = field_validator("additional_directories")(_no_additional_directories)


class LoadSessionParams(Wire):
    session_id: str
    cwd: str
    mcp_servers: list[dict[str, Any]] = Field(default_factory=list)
    additional_directories: list[str] | None = None

    _check_cwd = field_validator("cwd")(_absolute)
    _check_dirs = field_validator("additional_directories")(_no_additional_directories)


class ListSessionsParams(Wire):
    cwd: str | None = None
    cursor: str | None = None

    _check_cwd = field_validator("cwd")(_no_nul)


class SessionIdParams(Wire):
    """`session/cancel` and every method that only names a session."""

    session_id: str


class PromptParams(Wire):
    session_id: str
    prompt: list[ContentBlock] = Field(min_length=1)


class SetConfigOptionParams(Wire):
    session_id: str
    config_id: str
    value: str | bool


class SetModeParams(Wire):
    session_id: str
    mode_id: str


class StopReason(StrEnum):
    END_TURN = "end_turn"
    MAX_TOKENS = "max_tokens"
    MAX_TURN_REQUESTS = "max_turn_requests"
    REFUSAL = "refusal"
    CANCELLED = "cancelled"


# ---------------------------------------------------------------------------- permissions


class SelectedOutcome(Wire):
    outcome: Literal["selected"]
    option_id: str


class CancelledOutcome(Wire):
    outcome: Literal["cancelled"]


class RequestPermissionResult(Wire):
    """The client's answer to `session/request_permission`."""

    outcome: Annotated[SelectedOutcome | CancelledOutcome, Field(discriminator="outcome")]

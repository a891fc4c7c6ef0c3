"""What the session needs from a client connection, as typed protocols.

Every connection is a `FrameSink`. Some can do more — answer server→client requests
(permission questions, the client's files and terminal), filter updates the client did
not ask for, take an urgent frame ahead of a full buffer, track the sessions they are
attached to. Each extra is its own runtime-checkable protocol, so the session asks
"can this sink do X?" with a typed `isinstance` instead of probing attribute names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

from agentd.core import Event

if TYPE_CHECKING:
    from agentd.protocol import ClientCapabilities
    from agentd.session.command_syntax import Advertised

Frame = tuple[str, dict[str, Any]]  # (method, params) of a notification


class Gated(list[Frame]):
    """A `Renderer.live` result of one frame that names what a client must support to take
    it as it is (`gate`: an update kind or `_agentd/` method, asked of `FilteringSink`;
    "" when every client takes it). The hub answers that once per kind and client instead
    of calling `Renderer.for_client` for every frame; anything else (None, or a plain
    list) goes through `for_client`."""

    __slots__ = ("gate",)
    gate: str | None


class FrameSink(Protocol):
    """The outgoing side of a client connection."""

    id: str

    def send_notification(self, method: str, params: dict[str, Any]) -> bool:
        """Queue a notification; False when the client's buffer is full."""
        ...

    async def send_replay(self, method: str, params: dict[str, Any]) -> bool:
        """Queue a replay notification, awaiting room (paced by the client, never
        dropped); False once the client is gone."""
        ...


class Renderer(Protocol):
    """How events and the session's notices become frames for a client — the wire shape,
    which lives at the edge (agentd/transport/render.py) and is injected into the session."""

    def live(self, event: Event, last_seq: int) -> list[Frame]:
        """The frames of an event for a client watching live."""
        ...

    def whole(self, event: Event) -> list[Frame]:
        """The conversation in ACP form, final texts whole (`session/load`, a missed start)."""
        ...

    def attach(self, event: Event) -> list[Frame]:
        """Every durable event as an attach/SSE replay sends it."""
        ...

    def missed(self, event: Event, last_seq: int) -> list[Frame]:
        """A final text event's whole text, transient, for a live client that did not get
        it streamed (sent before the event's own frames)."""
        ...

    def for_client(
        self, frames: list[Frame], event: Event, supports: Callable[[str], bool], last_seq: int
    ) -> list[Frame]:
        """`frames` as a client that supports only some updates may receive them."""
        ...

    def encode(self, frame: Frame) -> bytes:
        """The notification's JSON-RPC text (UTF-8), as an `EncodedSink` sends it."""
        ...

    def resync(self, session_id: str, last_seq: int, reason: str) -> Frame:
        """Tells a client to resync from the last durable event it got."""
        ...

    def snapshot(self, snapshot: dict[str, Any]) -> Frame:
        """The live state an attaching client renders first."""
        ...

    def available_commands(self, session_id: str, commands: list[Advertised], seq: int) -> Frame:
        """The commands a client may offer its user."""
        ...

    def permission_request(
        self, session_id: str, request_id: str, tool_call: dict[str, Any], options: list[dict[str, str]]
    ) -> Frame:
        """The server→client request asking one client to answer a permission question."""
        ...


@runtime_checkable
class UrgentSink(Protocol):
    def send_urgent(self, method: str, params: dict[str, Any]) -> None:
        """Goes out ahead of a full buffer (a `resync_required`)."""
        ...


@runtime_checkable
class EncodedSink(Protocol):
    def send_encoded(self, text: bytes) -> bool:
        """`send_notification` of a frame already encoded (`Renderer.encode`), the same
        text for every client: one encoding per event, not one per client."""
        ...


@runtime_checkable
class FilteringSink(Protocol):
    def supports_update(self, session_update: str) -> bool:
        """Whether the client asked for this kind of `session/update`."""
        ...


@runtime_checkable
class RequestingSink(Protocol):
    """A client that answers server→client requests (not an SSE viewer)."""

    async def request(self, method: str, params: dict[str, Any]) -> Any: ...


@runtime_checkable
class CapableSink(RequestingSink, Protocol):
    """A client that told us what it offers (its files, a terminal) at `initialize`."""

    client_capabilities: ClientCapabilities


@runtime_checkable
class TrackingSink(Protocol):
    sessions: set[str]  # the session ids the connection is attached to (detached on close)


# `isinstance` against a runtime-checkable Protocol walks the protocol's members on every
# call (typing._get_protocol_attrs); the hub asks once per frame sent. The method-only
# protocols are answered once per class instead: a sink's methods live on its class.
_CLASS_HAS: dict[tuple[type, str], bool] = {}  # bounded: a few sink classes × two methods


def _class_has(cls: type, method: str) -> bool:
    key = (cls, method)
    found = _CLASS_HAS.get(key)
    if found is None:
        found = _CLASS_HAS[key] = callable(getattr(cls, method, None))
    return found


def urgent(sink: object) -> UrgentSink | None:
    return cast(UrgentSink, sink) if _class_has(type(sink), "send_urgent") else None


def encoded(sink: object) -> EncodedSink | None:
    return cast(EncodedSink, sink) if _class_has(type(sink), "send_encoded") else None


def filtering(sink: object) -> FilteringSink | None:
    return cast(FilteringSink, sink) if _class_has(type(sink), "supports_update") else None


def requesting(sink: object) -> RequestingSink | None:
    return cast(RequestingSink, sink) if _class_has(type(sink), "request") else None


def capable(sink: object) -> CapableSink | None:
    # (what `isinstance(sink, CapableSink)` checks — the method, and the attribute on the
    # instance — without the protocol walk it does per call; asked once per turn)
    if _class_has(type(sink), "request") and hasattr(sink, "client_capabilities"):
        return sink  # type: ignore[return-value]  # (checked above; `cast` is a call)
    return None


def tracked_sessions(sink: object) -> set[str] | None:
    return cast("set[str] | None", getattr(sink, "sessions", None))

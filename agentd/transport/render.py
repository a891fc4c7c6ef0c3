"""How a session event looks on the wire (ACP frames), live and in replay — rendered
here at the edge; the session layer gets `ACP_RENDERER` injected (agentd/session/sinks.py
`Renderer`) and never builds a frame itself.

Live, agent text arrives as chunks; the durable "final text" event then only marks the
message's end (as an `_agentd/event`), so a live client never gets the text twice. In
replay (`session/load`) the same durable event becomes one chunk holding the whole
text. Either way the assembled text is identical (R-E3).

An update sent exactly as stored is a `StoredPayload`: the encoder embeds the codec's bytes
(`Event.data`) rather than serialise the payload again (issue 27 item 4).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

from agentd.core import (
    TRANSIENT_KINDS,
    AgentText,
    AgentTextChunk,
    CompactionCompleted,
    CompactionProgress,
    ConfigOptionsChanged,
    Event,
    EventKind,
    ModeChanged,
    Notice,
    PermissionResolved,
    PlanUpdated,
    SessionInfoChanged,
    SubagentUpdate,
    ToolCallAnnounced,
    ToolCallFinished,
    ToolCallProgress,
    ToolCallStarted,
    Unparsed,
    UsageReported,
    UserMessage,
)
from agentd.protocol import (
    AGENTD_PREFIX,
    Notification,
    chunk_update,
    outgoing,
    session_notification,
)
from agentd.session import Frame, Gated

if TYPE_CHECKING:
    from agentd.session import Advertised

__all__ = ["ACP_RENDERER", "AcpRenderer", "Frame", "StoredPayload", "encode_message", "wire_params"]

SESSION_UPDATE = Notification.SESSION_UPDATE
EXT_EVENT = Notification.EVENT
EXT_PERMISSION_RESOLVED = Notification.PERMISSION_RESOLVED
RESYNC_REQUIRED = Notification.RESYNC_REQUIRED
SNAPSHOT = Notification.SESSION_SNAPSHOT


class StoredPayload(dict[str, Any]):
    """A frame's `update` (or `_agentd/event`'s `event`) that is exactly the event's stored
    payload: a dict for in-process readers (`for_client`, tests), and the codec's bytes
    (`Event.data`) for the encoder, which embeds them instead of serialising it again."""

    __slots__ = ("data",)
    data: bytes  # set where it is made (no Python `__init__`: one per event sent)


def _stored(event: Event) -> dict[str, Any]:
    # An older server's shape (`Unparsed`) stays a plain dict: its stored bytes need not be
    # what orjson writes (spacing, escapes), and the wire keeps sending the latter.
    if isinstance(event.update, Unparsed):
        return event.payload
    payload = StoredPayload(event.payload)
    payload.data = event.data
    return payload


_EMBEDDED = ("update", "event")  # the params keys a stored payload may sit under


def wire_params(params: dict[str, Any]) -> dict[str, Any]:
    """`params` as orjson should write it: a stored payload as its bytes, embedded."""
    for key in _EMBEDDED:
        value = params.get(key)
        if type(value) is StoredPayload:
            return {**params, key: orjson.Fragment(value.data)}
    return params


def encode_message(method: str, params: dict[str, Any]) -> bytes:
    """A notification's JSON-RPC bytes (`protocol.notification`'s shape), a stored payload
    embedded as stored."""
    return orjson.dumps({"jsonrpc": "2.0", "method": method, "params": wire_params(params)})


def encode_notification(method: str, params: dict[str, Any]) -> str:
    """A notification as the JSON-RPC text a WebSocket (or stdio) connection sends."""
    return encode_message(method, params).decode()


def encode_frame(frame: Frame) -> bytes:
    """`encode_message(*frame)` written out in one call: the hub encodes every frame it
    sends this way (once for all its clients), so no `wire_params`, no `notification`. Bytes,
    as the socket takes them: no decode here and encode again in the writer."""
    method, params = frame
    # (`_EMBEDDED` written out with `in`: no `dict.get` call per key and frame)
    if "update" in params and type(params["update"]) is StoredPayload:
        params = {**params, "update": orjson.Fragment(params["update"].data)}
    elif "event" in params and type(params["event"]) is StoredPayload:
        params = {**params, "event": orjson.Fragment(params["event"].data)}
    return orjson.dumps({"jsonrpc": "2.0", "method": method, "params": params})


def _meta(event: Event, last_seq: int) -> dict[str, Any]:
    agentd: dict[str, Any] = {"seq": event.seq if event.seq is not None else last_seq}
    if event.seq is None:
        agentd["transient"] = True
    return {"agentd": agentd}


def _update(event: Event, update: dict[str, Any], last_seq: int) -> Frame:
    return Notification.SESSION_UPDATE, session_notification(event.session_id, update, _meta(event, last_seq))


def _ext(event: Event, last_seq: int) -> Frame:
    # A compaction's replaced messages stay in the store; clients get the update only.
    update = event.update
    payload: dict[str, Any]
    if isinstance(update, CompactionCompleted):
        payload = update.update()
    elif isinstance(update, Unparsed):
        payload = event.payload
    else:  # (`_stored`, written out: most of a turn's events are sent this way)
        payload = StoredPayload(event.payload)
        payload.data = event.data
    return EXT_EVENT, {
        "sessionId": event.session_id,
        "kind": event.kind._value_,  # (`.value` is a Python property of the enum: a call)
        "event": payload,
        "_meta": _meta(event, last_seq),
    }


def _text_chunk(event: Event, text: str, message_id: str, thought: bool, last_seq: int) -> Frame:
    kind = "agent_thought_chunk" if thought else "agent_message_chunk"
    return _update(event, chunk_update(kind, text, message_id), last_seq)


def _usage(event: Event, usage: UsageReported, last_seq: int) -> Frame:
    # Replayed too, so a client that reloads sees the same stream as one that watched.
    update: dict[str, Any] = {"sessionUpdate": "usage_update", "used": usage.used, "size": usage.size}
    if usage.cost is not None:
        update["cost"] = usage.cost
    # (`_update`'s frame written out: once a turn, live and in replay)
    seq = event.seq
    agentd: dict[str, Any] = {"seq": last_seq, "transient": True} if seq is None else {"seq": seq}
    prompt = usage.prompt
    if isinstance(prompt, dict):  # this turn's tokens and cost so far
        turn = dict(prompt)
        turn.pop("byLane", None)
        agentd["turnUsage"] = turn
    return SESSION_UPDATE, {"sessionId": event.session_id, "update": update, "_meta": {"agentd": agentd}}


# Kinds whose stored payload is the ACP update clients are sent.
_AS_STORED = frozenset(
    {
        EventKind.TOOL_CALL,
        EventKind.TOOL_CALL_UPDATE,
        EventKind.TOOL_CALL_PROGRESS,
        EventKind.PLAN,
        EventKind.COMPACTION_PROGRESS,
    }
)


def _acp_frames(event: Event, last_seq: int, *, replay: bool) -> list[Frame] | None:
    """Frames for events that have an ACP form; None when the event has none."""
    match event.update:
        case UserMessage(message_id=mid, content=content):
            chunks = [
                {"sessionUpdate": "user_message_chunk", "content": b, "messageId": mid} for b in content
            ]
            return [_update(event, chunk, last_seq) for chunk in chunks]
        case AgentTextChunk(message_id=mid, text=text, thought=thought):
            return [_text_chunk(event, text, mid, thought, last_seq)]
        case AgentText(message_id=mid, text=text, thought=thought, interrupted=interrupted) if replay:
            if not text:
                return []
            method, params = _text_chunk(event, text, mid, thought, last_seq)
            # The complete text of this messageId: a client holding a partial copy replaces it.
            params["_meta"]["agentd"]["final"] = True
            if interrupted:
                params["_meta"]["agentd"]["interrupted"] = True  # cut off by a stop or crash
            return [(method, params)]
        case ToolCallProgress() if not replay:
            return [_update(event, _stored(event), last_seq)]
        case SubagentUpdate(transient=transient) if not (transient and replay):
            return [_update(event, _stored(event), last_seq)]
        case ToolCallAnnounced() | ToolCallStarted() | ToolCallFinished() | PlanUpdated():
            return [_update(event, _stored(event), last_seq)]
        case CompactionCompleted():
            return [_update(event, event.update.update(), last_seq)]
        case CompactionProgress() if not replay:
            return [_update(event, _stored(event), last_seq)]
        case Notice(title=title, severity=severity):
            notice = {"sessionUpdate": "notice", "severity": severity.value, "title": title}
            return [_update(event, notice, last_seq)]
        case UsageReported() as usage:
            return [_usage(event, usage, last_seq)]
        case ConfigOptionsChanged(config_options=options):
            config: dict[str, Any] = {"sessionUpdate": "config_option_update", "configOptions": options}
            return [_update(event, config, last_seq)]
        case SessionInfoChanged(title=title, updated_at=updated_at):
            info = {"sessionUpdate": "session_info_update", "title": title, "updatedAt": updated_at}
            return [_update(event, info, last_seq)]
        case Unparsed(kind=kind) if kind in _AS_STORED and not (replay and kind in TRANSIENT_KINDS):
            # An older server's shape of an update stored as the ACP update itself: sent as stored.
            return [_update(event, event.payload, last_seq)]
        case Unparsed(kind=EventKind.USAGE):
            p = event.payload
            return [
                _update(
                    event,
                    {"sessionUpdate": "usage_update", "used": p.get("used"), "size": p.get("size")},
                    last_seq,
                )
            ]
        case ModeChanged(mode_id=mode_id):
            mode = {"sessionUpdate": "current_mode_update", "currentModeId": mode_id}
            return [_update(event, mode, last_seq)]
    return None


def for_client(
    frames: list[Frame], event: Event, supports: Callable[[str], bool], last_seq: int
) -> list[Frame]:
    """Frames the client may receive: a capability-gated ACP update (compaction, notice)
    goes to a client that did not advertise it as an `_agentd/event` instead — if it opted
    into those; an `_agentd/` notification goes only to a client that opted in. `frames`
    itself when the client may have them all (callers never change the list)."""
    if len(frames) == 1:  # nearly every event: one frame, asked about once
        method, params = frames[0]
        if method == SESSION_UPDATE:
            if supports(params["update"]["sessionUpdate"]):
                return frames
        elif not method.startswith(AGENTD_PREFIX) or supports(method):
            return frames
    out: list[Frame] = []
    for method, params in frames:
        if method == SESSION_UPDATE and not supports(params["update"]["sessionUpdate"]):
            method, params = _ext(event, last_seq)
            if (method, params) in out:
                continue
        if method.startswith(AGENTD_PREFIX) and not supports(method):
            continue
        out.append((method, params))
    return out


# Update types sent live as their stored payload, as `_acp_frames` sends them (`_stored`:
# `Unparsed` excepted, which is none of these).
_LIVE_AS_STORED = frozenset(
    {ToolCallAnnounced, ToolCallStarted, ToolCallFinished, PlanUpdated, ToolCallProgress, CompactionProgress}
)

# Update types with no ACP form live (every frame an `_agentd/event`), learned as they go
# by: for a live frame that depends on the type alone (`Unparsed` excepted, by its kind).
_NO_LIVE_ACP: set[type] = set()


def live_frames(event: Event, last_seq: int) -> list[Frame]:
    """An event's frames for a live client: a `Gated` list when it is one frame, naming what
    a client must support to take it as it is (as `for_client` would ask)."""
    update = event.update
    cls = type(update)
    seq = event.seq
    if type(update) is AgentTextChunk:  # most frames of a turn: written out (`_text_chunk`'s frame)
        agentd: dict[str, Any] = {"seq": last_seq, "transient": True} if seq is None else {"seq": seq}
        kind = "agent_thought_chunk" if update.thought else "agent_message_chunk"
        body: dict[str, Any] = {"sessionUpdate": kind, "content": {"type": "text", "text": update.text}}
        if update.message_id is not None:  # (as `chunk_update` writes it)
            body["messageId"] = update.message_id
        params = {"sessionId": event.session_id, "update": body, "_meta": {"agentd": agentd}}
        out = Gated(((SESSION_UPDATE, params),))
        out.gate = kind
        return out
    if cls in _NO_LIVE_ACP:  # the rest of a turn's frames: `_ext`'s (or the resolution's) written out
        meta = {"agentd": {"seq": last_seq, "transient": True} if seq is None else {"seq": seq}}
        if cls is PermissionResolved:
            resolved = {"sessionId": event.session_id, **event.payload, "_meta": meta}
            out = Gated(((EXT_PERMISSION_RESOLVED, resolved),))
            out.gate = EXT_PERMISSION_RESOLVED
            return out
        # (never `CompactionCompleted` nor `Unparsed`: the first has an ACP form, the second
        # is never learned here; so the payload is the stored one, as `_ext` makes it)
        payload = StoredPayload(event.payload)
        payload.data = event.data
        ext = {"sessionId": event.session_id, "kind": event.kind._value_, "event": payload, "_meta": meta}
        out = Gated(((EXT_EVENT, ext),))
        out.gate = EXT_EVENT
        return out
    if cls in _LIVE_AS_STORED:  # a tool call's frames: `_acp_frames`' case, written out
        payload = StoredPayload(event.payload)
        payload.data = event.data
        agentd = {"seq": last_seq, "transient": True} if seq is None else {"seq": seq}
        params = {"sessionId": event.session_id, "update": payload, "_meta": {"agentd": agentd}}
        out = Gated(((SESSION_UPDATE, params),))
        out.gate = payload["sessionUpdate"]
        return out
    out = Gated()
    frames: list[Frame] | None
    if type(update) is UsageReported:  # once a turn: `_acp_frames`' case, without the match
        frames = [_usage(event, update, last_seq)]
    else:
        frames = _acp_frames(event, last_seq, replay=False)
        if frames is None and cls is not Unparsed:
            _NO_LIVE_ACP.add(cls)
    if frames is not None:
        out += frames
    elif isinstance(update, PermissionResolved):
        resolved = {"sessionId": event.session_id, **event.payload, "_meta": _meta(event, last_seq)}
        out.append((EXT_PERMISSION_RESOLVED, resolved))
    else:
        out.append(_ext(event, last_seq))
    out.gate = None
    if len(out) == 1:  # the question `for_client` asks of one frame
        method, first = out[0]
        if method == SESSION_UPDATE:
            out.gate = first["update"]["sessionUpdate"]
        else:
            out.gate = method if method.startswith(AGENTD_PREFIX) else ""
    return out


def acp_replay_frames(event: Event) -> list[Frame]:
    """`session/load` replay: the conversation in ACP form only."""
    return _acp_frames(event, event.seq or 0, replay=True) or []


def missed_frames(event: Event, last_seq: int) -> list[Frame]:
    """The whole text of a final message event for a live client that did not get it
    streamed (it attached mid-message, or watches from another replica, which streams
    nothing): one chunk marked `final` (it replaces any partial copy) but transient, at
    the client's cursor — so the event's seq still comes once, in the one form every
    live client gets it (`live_frames`: the message's end) (issue 26 item 3)."""
    frames = _acp_frames(event, event.seq or 0, replay=True) or []
    for _, params in frames:
        agentd = params["_meta"]["agentd"]
        agentd["seq"], agentd["transient"] = last_seq, True
    return frames


def attach_frames(event: Event) -> list[Frame]:
    """`_agentd/session/attach` / SSE replay: every durable event — the conversation in ACP
    form (final texts whole, marked `final`), everything else as in the live stream."""
    frames = _acp_frames(event, event.seq or 0, replay=True)
    if frames is not None:
        return frames
    return live_frames(event, event.seq or 0)


def available_commands_frame(session_id: str, commands: list[Advertised], seq: int) -> Frame:
    """ACP `available_commands_update` for one client (transient: at the session's last seq)."""
    entries: list[dict[str, Any]] = []
    for c in commands:
        entry: dict[str, Any] = {"name": c.name, "description": c.description}
        if c.hint:
            entry["input"] = {"hint": c.hint}
        entries.append(entry)
    update = {"sessionUpdate": "available_commands_update", "availableCommands": entries}
    return Notification.SESSION_UPDATE, {
        "sessionId": session_id,
        "update": update,
        "_meta": {"agentd": {"seq": seq, "transient": True}},
    }


class AcpRenderer:
    """The session's `Renderer`: events and notices as ACP (and `_agentd/…`) frames. The
    per-frame calls are the functions themselves (no method in between)."""

    live = staticmethod(live_frames)
    whole = staticmethod(acp_replay_frames)
    attach = staticmethod(attach_frames)
    missed = staticmethod(missed_frames)
    for_client = staticmethod(for_client)

    encode = staticmethod(encode_frame)

    def resync(self, session_id: str, last_seq: int, reason: str) -> Frame:
        out = outgoing.resync_required(session_id, last_seq, reason)
        return out.method, out.params

    def snapshot(self, snapshot: dict[str, Any]) -> Frame:
        return SNAPSHOT, snapshot

    def available_commands(self, session_id: str, commands: list[Advertised], seq: int) -> Frame:
        return available_commands_frame(session_id, commands, seq)

    def permission_request(
        self, session_id: str, request_id: str, tool_call: dict[str, Any], options: list[dict[str, str]]
    ) -> Frame:
        out = outgoing.request_permission(session_id, tool_call, options, request_id)
        return out.method, out.params


ACP_RENDERER = AcpRenderer()

"""A deterministic scripted provider (R-M3) for tests, demos and benchmarks.

It replays a JSON script: each step is one `stream()` call and describes the text,
reasoning and tool calls to stream, how fast, which stop reason and usage to report, and
optionally a fault to inject (immediately or after some deltas, to simulate a cut
stream). It obeys the `Provider` contract of `base.py` exactly, so the loop cannot tell it
from a real provider. The format is documented in `docs/scripted-provider.md`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agentd.core import (
    ErrorKind,
    HarnessError,
    ProviderRequest,
    ReasoningDelta,
    Stop,
    StopReason,
    StreamEvent,
    TextDelta,
    ToolCallComplete,
    ToolCallDelta,
    Usage,
    events_of,
)

EXHAUSTED_TEXT = "(scripted provider: script exhausted)"


class _Strict(BaseModel):
    # Unknown keys are rejected so a typo ("chunksize") fails loudly instead of being ignored.
    model_config = ConfigDict(extra="forbid")


class ScriptToolCall(_Strict):
    name: str = Field(min_length=1)
    # A JSON object is serialised for the model; a string is sent verbatim, which lets a
    # script inject malformed argument JSON.
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    id: str | None = None

    @field_validator("arguments", mode="before")
    @classmethod
    def _object_or_string(cls, value: Any) -> Any:
        # Checked up front: pydantic's own union error names each member type, which reads badly.
        if not isinstance(value, dict | str):
            raise ValueError(f"must be a JSON object (or a raw JSON string), got {type(value).__name__}")
        return value


class ScriptUsage(_Strict):
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cache_read_tokens: int = Field(default=0, ge=0)
    cache_write_tokens: int = Field(default=0, ge=0)
    model: str = ""  # the model the fake server says answered (traces' gen_ai.response.model)


class ScriptError(_Strict):
    kind: ErrorKind
    message: str
    retry_after: float | None = Field(default=None, ge=0)
    status: int | None = None
    # None: fail before the first event; n: fail after n deltas were yielded (stream cut).
    after_chunks: int | None = Field(default=None, ge=0)


class ScriptStep(_Strict):
    """One provider call."""

    text: str | None = None
    reasoning: str | None = None
    tool_calls: list[ScriptToolCall] = Field(default_factory=list)
    chunk_size: int = Field(default=16, ge=1)
    delay: float = Field(default=0.0, ge=0)
    chunk_delay: float = Field(default=0.0, ge=0)
    stop: Literal["end_turn", "tool_use", "max_tokens", "refusal"] | None = None
    usage: ScriptUsage | None = None
    error: ScriptError | None = None
    expect: str | None = None

    def stop_reason(self) -> StopReason:
        if self.stop is not None:
            return StopReason(self.stop)
        return StopReason.TOOL_USE if self.tool_calls else StopReason.END_TURN


class Script(_Strict):
    loop: bool = False
    steps: list[ScriptStep] = Field(default_factory=list)


def _format_loc(loc: tuple[int | str, ...]) -> str:
    """`("steps", 2, "tool_calls", 0, "name")` → `steps[2].tool_calls[0].name`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out or "<script>"


def parse_script(data: Any, *, source: str = "script") -> Script:
    """Validate raw script data; any problem becomes a `ValueError` naming it and where."""
    if not isinstance(data, dict):
        raise ValueError(
            f'invalid {source}: expected an object like {{"steps": [...]}}, got {type(data).__name__}'
        )
    try:
        return Script.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{_format_loc(tuple(e['loc']))}: {e['msg'].removeprefix('Value error, ')}" for e in exc.errors()
        )
        raise ValueError(f"invalid {source}: {problems}") from None


def _estimate_tokens(chars: int) -> int:
    # The usual rough chars/4 rule; deterministic, which is all tests and demos need.
    return (chars + 3) // 4


def _request_chars(request: ProviderRequest) -> int:
    n = len(request.system)
    for m in request.messages:
        n += len(m.content) + len(m.reasoning)
        n += sum(len(tc.name) + len(tc.arguments) for tc in m.tool_calls)
    for t in request.tools:
        n += len(t.name) + len(t.description) + len(json.dumps(t.parameters))
    return n


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


class ScriptedProvider:
    """Replays a `Script`, one step per `stream()` call; records every request it gets."""

    name = "scripted"

    def __init__(
        self, script: Script, *, supports_native_schema: bool = False, per_session: bool = False
    ) -> None:
        self.script = script
        self.supports_native_schema = supports_native_schema
        # per_session: every session (`ProviderRequest.session_id`) plays the script from
        # its first step, as a server's model should; otherwise one position for all calls.
        self.per_session = per_session
        self.requests: list[ProviderRequest] = []
        # Steps consumed so far (keeps counting across loop wraps), per session or under None.
        self._positions: dict[str | None, int] = {}
        self._call_counter = 0
        # Auto ids must not collide with ids the script spells out itself.
        self._explicit_ids = {tc.id for s in script.steps for tc in s.tool_calls if tc.id is not None}

    @classmethod
    def from_dict(
        cls, data: Any, *, supports_native_schema: bool = False, per_session: bool = False
    ) -> ScriptedProvider:
        return cls(parse_script(data), supports_native_schema=supports_native_schema, per_session=per_session)

    @classmethod
    def from_file(
        cls, path: str | Path, *, supports_native_schema: bool = False, per_session: bool = False
    ) -> ScriptedProvider:
        text = Path(path).read_text(encoding="utf-8")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"invalid script {path}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
            ) from None
        script = parse_script(data, source=f"script {path}")
        return cls(script, supports_native_schema=supports_native_schema, per_session=per_session)

    @classmethod
    def demo(cls, *, supports_native_schema: bool = False, per_session: bool = True) -> ScriptedProvider:
        """The bundled demo: a coding agent writing, editing and running `hello.py`.
        Per session by default: every session replays it from the start."""
        ref = resources.files("agentd").joinpath("demo/demo_script.json")
        data = json.loads(ref.read_text(encoding="utf-8"))
        script = parse_script(data, source="demo script")
        return cls(script, supports_native_schema=supports_native_schema, per_session=per_session)

    async def aclose(self) -> None:
        """Nothing to release: the scripted provider holds no connections."""

    def reset(self) -> None:
        """Start the script over and forget recorded requests."""
        self.requests.clear()
        self._positions.clear()
        self._call_counter = 0

    def _next_step(self, session_id: str | None) -> tuple[int, ScriptStep] | None:
        steps = self.script.steps
        key = session_id if self.per_session else None
        position = self._positions.get(key, 0)
        if not steps or (position >= len(steps) and not self.script.loop):
            return None
        self._positions[key] = position + 1
        return position % len(steps), steps[position % len(steps)]

    def _next_call_id(self) -> str:
        while True:
            self._call_counter += 1
            candidate = f"call_{self._call_counter}"
            if candidate not in self._explicit_ids:
                return candidate

    def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
        return events_of(self.stream_batches(request))

    async def stream_batches(self, request: ProviderRequest) -> AsyncIterator[list[StreamEvent]]:
        """The step's events in as few batches as a network would bring them: one, or one
        per delta when the step spaces its chunks (`chunk_delay`)."""
        self.requests.append(request)
        input_tokens = _estimate_tokens(_request_chars(request))
        picked = self._next_step(request.session_id)
        if picked is None:
            # Never hang or fail when a test sends more calls than scripted: say so in text.
            yield [
                TextDelta(EXHAUSTED_TEXT),
                Usage(input_tokens=input_tokens, output_tokens=_estimate_tokens(len(EXHAUSTED_TEXT))),
                Stop(StopReason.END_TURN),
            ]
            return
        index, step = picked

        if step.expect is not None:
            last_user = next((m.content for m in reversed(request.messages) if m.role == "user"), None)
            if last_user is None or step.expect not in last_user:
                raise HarnessError(
                    ErrorKind.INTERNAL,
                    f"script step {index} expected the last user message to contain {step.expect!r}, "
                    f"got {last_user!r}",
                )

        if step.delay:
            await asyncio.sleep(step.delay)

        error = step.error
        if error is not None and error.after_chunks is None:
            raise self._error(error)

        calls = [
            (i, tc.id or self._next_call_id(), tc.name, self._arguments_text(tc))
            for i, tc in enumerate(step.tool_calls)
        ]
        deltas: list[StreamEvent] = []
        deltas += [ReasoningDelta(c) for c in _chunks(step.reasoning or "", step.chunk_size)]
        deltas += [TextDelta(c) for c in _chunks(step.text or "", step.chunk_size)]
        for i, call_id, name, args in calls:
            # The first fragment carries id and name, as real providers stream them.
            fragments = _chunks(args, step.chunk_size) or [""]
            deltas.append(ToolCallDelta(index=i, id=call_id, name=name, arguments_delta=fragments[0]))
            deltas += [ToolCallDelta(index=i, arguments_delta=f) for f in fragments[1:]]

        if error is not None:  # the deltas before the error, then the error
            if head := deltas[: error.after_chunks]:
                if step.chunk_delay:
                    for n, delta in enumerate(head):
                        if n:
                            await asyncio.sleep(step.chunk_delay)
                        yield [delta]
                else:
                    yield head
            raise self._error(error)
        if step.chunk_delay:
            for n, delta in enumerate(deltas):
                if n:
                    await asyncio.sleep(step.chunk_delay)
                yield [delta]
            deltas = []

        deltas += [ToolCallComplete(index=i, id=c, name=name, arguments=args) for i, c, name, args in calls]
        if step.usage is not None:
            deltas.append(Usage(**step.usage.model_dump()))
        else:
            out_chars = len(step.text or "") + len(step.reasoning or "")
            out_chars += sum(len(name) + len(args) for _, _, name, args in calls)
            deltas.append(Usage(input_tokens=input_tokens, output_tokens=_estimate_tokens(out_chars)))
        deltas.append(Stop(step.stop_reason()))
        yield deltas

    @staticmethod
    def _arguments_text(call: ScriptToolCall) -> str:
        if isinstance(call.arguments, str):
            return call.arguments
        return json.dumps(call.arguments, ensure_ascii=False)

    @staticmethod
    def _error(spec: ScriptError) -> HarnessError:
        return HarnessError(spec.kind, spec.message, status=spec.status, retry_after=spec.retry_after)

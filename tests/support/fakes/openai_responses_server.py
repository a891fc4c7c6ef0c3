"""A real local HTTP server speaking the OpenAI Responses API streaming wire format
(`POST /v1/responses`, SSE with `event:` names and typed JSON events).

Like `FakeOpenAI`: uvicorn on 127.0.0.1 in a background thread, responses scripted in order,
every request recorded, and a body the official `openai` package's request types reject
answered with a 400. Script types: `ResponseStream` (items: `ReasoningItem`,
`MessageItem`, `FunctionCallItem`; optional delays, a stall, a cut, a failure) and, shared
with the Chat Completions fake, `ErrorResponse` and `RawStream`.

    async with FakeResponses([ResponseStream([MessageItem.from_text("Hi")])]) as fake:
        provider = OpenAIResponsesProvider(base_url=fake.base_url, api_key="sk-test", model="gpt-5")
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.support.fakes.openai_server import ErrorResponse, RawStream, _BlockStream, split
from tests.support.fakes.threaded import ScriptedServer
from tests.support.openai_types import responses_body_error

__all__ = [
    "ErrorResponse",
    "FakeResponses",
    "FunctionCallItem",
    "MessageItem",
    "RawStream",
    "ReasoningItem",
    "ResponseStream",
    "ResponsesUsage",
]


@dataclass
class ReasoningItem:
    """A reasoning item: summary paragraphs (each streamed in `chunk_size` pieces) and the
    opaque `encrypted_content` the client must send back."""

    summary: list[str] = field(default_factory=list)
    encrypted_content: str = "gAAAAA-fake-encrypted-reasoning"
    id: str = "rs_fake_1"
    chunk_size: int = 6


@dataclass
class MessageItem:
    pieces: list[str] = field(default_factory=list)
    refusal: bool = False
    id: str = "msg_fake_1"

    @classmethod
    def from_text(cls, text: str, *, chunk_size: int = 4, **kwargs: Any) -> MessageItem:
        return cls(split(text, chunk_size), **kwargs)


@dataclass
class FunctionCallItem:
    call_id: str
    name: str
    arguments: str
    fragment_size: int = 8
    id: str = ""


@dataclass
class ResponsesUsage:
    input_tokens: int = 20
    output_tokens: int = 8
    cached_tokens: int = 0
    reasoning_tokens: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "input_tokens_details": {"cached_tokens": self.cached_tokens},
            "output_tokens": self.output_tokens,
            "output_tokens_details": {"reasoning_tokens": self.reasoning_tokens},
            "total_tokens": self.input_tokens + self.output_tokens,
        }


Item = ReasoningItem | MessageItem | FunctionCallItem


@dataclass
class ResponseStream:
    """A 200 streamed response. Ends with `response.completed` (or `response.incomplete` when
    `incomplete_reason` is set). Faults: `fail_with={"code", "message"}` ends with
    `response.failed`; `error_event=` sends a bare `error` event instead; `stall_after=N`
    goes silent for `stall_s` after N events; `cut_after=N` ends the body after N events."""

    items: list[Item] = field(default_factory=list)
    usage: ResponsesUsage | None = field(default_factory=ResponsesUsage)
    incomplete_reason: str | None = None
    fail_with: dict[str, Any] | None = None
    error_event: dict[str, Any] | None = None
    first_event_delay: float = 0.0
    event_delay: float = 0.0
    stall_after: int | None = None
    stall_s: float = 30.0
    cut_after: int | None = None
    model: str = "gpt-fake"

    def events(self) -> list[tuple[str, dict[str, Any]]]:
        """(event type, data) pairs this script streams, before any fault is applied."""
        response: dict[str, Any] = {
            "id": "resp_fake",
            "object": "response",
            "created_at": int(time.time()),
            "status": "in_progress",
            "model": self.model,
            "output": [],
            "usage": None,
        }
        out: list[tuple[str, dict[str, Any]]] = [
            ("response.created", {"response": dict(response)}),
            ("response.in_progress", {"response": dict(response)}),
        ]
        done_items = []
        for index, item in enumerate(self.items):
            events, done = _item_events(index, item)
            out += events
            done_items.append(done)
        if self.error_event is not None:
            out.append(("error", dict(self.error_event)))
        elif self.fail_with is not None:
            failed = {**response, "status": "failed", "output": done_items, "error": self.fail_with}
            out.append(("response.failed", {"response": failed}))
        else:
            final = {
                **response,
                "status": "incomplete" if self.incomplete_reason else "completed",
                "output": done_items,
                "incomplete_details": {"reason": self.incomplete_reason} if self.incomplete_reason else None,
                "usage": self.usage.to_json() if self.usage else None,
            }
            name = "response.incomplete" if self.incomplete_reason else "response.completed"
            out.append((name, {"response": final}))
        return [(name, {"type": name, "sequence_number": i, **data}) for i, (name, data) in enumerate(out)]

    def wire_blocks(self) -> list[bytes]:
        blocks = [
            f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()
            for name, data in self.events()
        ]
        if self.cut_after is not None:
            blocks = blocks[: self.cut_after]
        return blocks


def _item_events(index: int, item: Item) -> tuple[list[tuple[str, dict[str, Any]]], dict[str, Any]]:
    """One output item's events (added, deltas, done) and the finished item."""
    events: list[tuple[str, dict[str, Any]]] = []

    def emit(name: str, **data: Any) -> None:
        events.append((f"response.{name}", {"output_index": index, **data}))

    done: dict[str, Any]
    if isinstance(item, ReasoningItem):
        done = {
            "id": item.id,
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": t} for t in item.summary],
            "encrypted_content": item.encrypted_content,
        }
        emit("output_item.added", item={**done, "summary": []})
        for j, text in enumerate(item.summary):
            ref = {"item_id": item.id, "summary_index": j}
            emit("reasoning_summary_part.added", **ref, part={"type": "summary_text", "text": ""})
            for piece in split(text, item.chunk_size):
                emit("reasoning_summary_text.delta", **ref, delta=piece)
            emit("reasoning_summary_text.done", **ref, text=text)
            emit("reasoning_summary_part.done", **ref, part={"type": "summary_text", "text": text})
        emit("output_item.done", item=done)
        return events, done
    if isinstance(item, MessageItem):
        text = "".join(item.pieces)
        kind, key = ("refusal", "refusal") if item.refusal else ("output_text", "text")
        part: dict[str, Any] = {"type": kind, key: text}
        if not item.refusal:
            part["annotations"] = []
        done = {"id": item.id, "type": "message", "status": "completed", "role": "assistant"}
        done["content"] = [part]
        emit("output_item.added", item={**done, "status": "in_progress", "content": []})
        ref = {"item_id": item.id, "content_index": 0}
        emit("content_part.added", **ref, part={**part, key: ""})
        for piece in item.pieces:
            emit(f"{kind}.delta", **ref, delta=piece)
        emit(f"{kind}.done", **ref, **{key: text})
        emit("content_part.done", **ref, part=part)
        emit("output_item.done", item=done)
        return events, done
    item_id = item.id or f"fc_{item.call_id}"
    done = {
        "id": item_id,
        "type": "function_call",
        "status": "completed",
        "call_id": item.call_id,
        "name": item.name,
        "arguments": item.arguments,
    }
    emit("output_item.added", item={**done, "status": "in_progress", "arguments": ""})
    for piece in split(item.arguments, max(1, item.fragment_size)):
        emit("function_call_arguments.delta", item_id=item_id, delta=piece)
    emit("function_call_arguments.done", item_id=item_id, arguments=item.arguments)
    emit("output_item.done", item=done)
    return events, done


ScriptedResponse = ResponseStream | ErrorResponse | RawStream


class FakeResponses(ScriptedServer[ScriptedResponse]):
    """A scripted Responses API server (`with` / `async with`); see the module docstring."""

    thread_name = "fake-openai-responses"

    def __init__(
        self, responses: list[ScriptedResponse] | None = None, *, default: ScriptedResponse | None = None
    ) -> None:
        super().__init__(responses, default=default)
        self.app = Starlette(routes=[Route("/v1/responses", self._handle, methods=["POST"])])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def _handle(self, request: Request) -> Response:
        body = await self._record(request)
        problem = responses_body_error(body)
        if problem is not None:
            error = {"message": f"FakeResponses: invalid body: {problem}", "type": "invalid_request_error"}
            return JSONResponse({"error": error}, status_code=400)
        script = self._next()
        if script is None:
            error = {"message": "FakeResponses: no scripted response left", "type": "server_error"}
            return JSONResponse({"error": error}, status_code=500)
        if isinstance(script, ErrorResponse):
            return JSONResponse(script.to_json(), status_code=script.status, headers=script.headers)
        if isinstance(script, RawStream):
            blocks = [b.encode() for b in script.blocks]
            return _BlockStream(
                blocks, status=script.status, content_type=script.content_type, delay=script.chunk_delay
            )
        return _BlockStream(
            script.wire_blocks(),
            first_delay=script.first_event_delay,
            delay=script.event_delay,
            pauses={script.stall_after: script.stall_s} if script.stall_after is not None else None,
        )

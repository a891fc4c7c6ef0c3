"""A real local HTTP server speaking the OpenAI Chat Completions streaming wire format.

Served by uvicorn on 127.0.0.1 (a free port) in a background thread, so clients exercise
real sockets, real chunked transfer and real connection drops; the fake's own event loop
keeps its timing even when the test's loop is busy. Responses are scripted in order:

    async with FakeOpenAI([Completion.from_text("Hello world", chunk_size=5)]) as fake:
        fake.enqueue(ErrorResponse.rate_limited(retry_after=3))
        provider = OpenAIProvider(base_url=fake.base_url, api_key="sk-test", model="m")
        ...
        fake.requests[0].body["messages"]

Script types: `Completion` (a normal stream, optionally with delays, a cut or a malformed
chunk), `ErrorResponse` (an HTTP error with OpenAI's JSON error body) and `RawStream`
(verbatim bytes, for wire-format edge cases).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from tests.support.fakes.threaded import RecordedRequest, ScriptedServer
from tests.support.openai_types import chat_body_error

# -- scripted responses ------------------------------------------------------------------


@dataclass
class ToolCallScript:
    """One tool call; its `arguments` text is streamed in `fragment_size`-character pieces."""

    id: str
    name: str
    arguments: str
    fragment_size: int = 8

    def fragments(self) -> list[str]:
        size = max(1, self.fragment_size)
        return [self.arguments[i : i + size] for i in range(0, len(self.arguments), size)] or [""]


@dataclass
class UsageScript:
    prompt_tokens: int = 10
    completion_tokens: int = 5
    cached_tokens: int = 0
    reasoning_tokens: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": self.cached_tokens, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": self.reasoning_tokens,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }


@dataclass
class Completion:
    """A 200 streamed completion, chunk by chunk as OpenAI sends it.

    Chunk order: role chunk, reasoning, content, refusal, tool-call fragments, the
    finish_reason chunk, then (if the request asked for `include_usage`) the usage chunk,
    then `data: [DONE]`. Faults: `stall_after=N` goes silent for `stall_s` after N blocks;
    `cut_after=N` sends only the first N chunks and ends the body (`cut_abruptly=True`
    drops the TCP connection instead of ending cleanly);
    `malformed_after=N` sends a non-JSON `data:` line after N chunks.
    """

    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    reasoning_field: str = "reasoning_content"  # vLLM/DeepSeek; OpenRouter & newer vLLM: "reasoning"
    refusal: list[str] = field(default_factory=list)
    tool_calls: list[ToolCallScript] = field(default_factory=list)
    interleave_tool_calls: bool = True  # round-robin the calls' fragments across chunks
    tool_fragments_per_chunk: int = 1  # >1 puts fragments of several calls in one chunk
    finish_reason: str | None = None  # None: "tool_calls" if there are tool calls, else "stop"
    usage: UsageScript | None = field(default_factory=UsageScript)
    first_chunk_delay: float = 0.0  # seconds before the first chunk (headers go out at once)
    chunk_delay: float = 0.0  # seconds between chunks
    cut_after: int | None = None
    cut_abruptly: bool = False
    malformed_after: int | None = None
    send_done: bool = True
    model: str = "fake-model"
    stall_after: int | None = None  # after N blocks, go silent for `stall_s` (a stalled stream)
    stall_s: float = 30.0
    # After `gate_after` blocks, wait until the test sets `gate` (a stream provably mid-way).
    gate_after: int | None = None
    gate: threading.Event | None = None
    # When set, `time.perf_counter()` after each block went out (benchmarks: chunk delays).
    sent_at: list[float] | None = None

    @classmethod
    def from_text(cls, text: str, *, chunk_size: int = 4, **kwargs: Any) -> Completion:
        return cls(content=split(text, chunk_size), **kwargs)

    def chunks(self, *, include_usage: bool) -> list[dict[str, Any]]:
        """The JSON chunks (full envelopes) this script streams, before any fault is applied."""
        deltas: list[tuple[dict[str, Any], str | None]] = [({"role": "assistant", "content": ""}, None)]
        deltas += [({self.reasoning_field: t}, None) for t in self.reasoning]
        deltas += [({"content": t}, None) for t in self.content]
        deltas += [({"refusal": t}, None) for t in self.refusal]
        per_chunk = max(1, self.tool_fragments_per_chunk)
        fragments = self._tool_fragments()
        for i in range(0, len(fragments), per_chunk):
            deltas.append(({"tool_calls": fragments[i : i + per_chunk]}, None))
        finish = self.finish_reason or ("tool_calls" if self.tool_calls else "stop")
        deltas.append(({}, finish))

        created = int(time.time())
        out = []
        for delta, finish_reason in deltas:
            chunk: dict[str, Any] = {
                "id": "chatcmpl-fake",
                "object": "chat.completion.chunk",
                "created": created,
                "model": self.model,
                "system_fingerprint": "fp_fake",
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
            }
            if include_usage:
                chunk["usage"] = None  # OpenAI sends an explicit null until the last chunk
            out.append(chunk)
        if include_usage and self.usage is not None:
            out.append({**out[-1], "choices": [], "usage": self.usage.to_json()})
        return out

    def _tool_fragments(self) -> list[dict[str, Any]]:
        # Per call: a header fragment (id, type, name, empty arguments) then argument pieces.
        per_call: list[list[dict[str, Any]]] = []
        for index, call in enumerate(self.tool_calls):
            frags: list[dict[str, Any]] = [
                {
                    "index": index,
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": ""},
                }
            ]
            frags += [{"index": index, "function": {"arguments": piece}} for piece in call.fragments()]
            per_call.append(frags)
        if not self.interleave_tool_calls:
            return [f for frags in per_call for f in frags]
        out = []
        for step in range(max((len(f) for f in per_call), default=0)):
            out += [frags[step] for frags in per_call if step < len(frags)]
        return out

    def wire_blocks(self, *, include_usage: bool) -> list[bytes]:
        blocks = [sse(json.dumps(c, separators=(",", ":"))) for c in self.chunks(include_usage=include_usage)]
        if self.send_done:
            blocks.append(sse("[DONE]"))
        if self.malformed_after is not None:
            blocks.insert(self.malformed_after, sse('{"id": "chatcmpl-fake", "choices": [{"delta": {"con'))
        if self.cut_after is not None:
            blocks = blocks[: self.cut_after]
        return blocks


@dataclass
class ErrorResponse:
    """An HTTP error with OpenAI's JSON error envelope (or a verbatim `body`)."""

    status: int
    message: str = "error"
    type: str | None = None
    code: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None  # overrides the {"error": {...}} envelope when set

    def to_json(self) -> Any:
        if self.body is not None:
            return self.body
        return {"error": {"message": self.message, "type": self.type, "param": None, "code": self.code}}

    @classmethod
    def rate_limited(cls, *, retry_after: int | str | None = None) -> ErrorResponse:
        headers = {"retry-after": str(retry_after)} if retry_after is not None else {}
        return cls(
            429,
            "Rate limit reached for requests per min (RPM). Please try again later.",
            type="requests",
            code="rate_limit_exceeded",
            headers=headers,
        )

    @classmethod
    def insufficient_quota(cls) -> ErrorResponse:
        return cls(
            429,
            "You exceeded your current quota, please check your plan and billing details.",
            type="insufficient_quota",
            code="insufficient_quota",
        )

    @classmethod
    def unauthorized(cls) -> ErrorResponse:
        return cls(
            401, "Incorrect API key provided: sk-test.", type="invalid_request_error", code="invalid_api_key"
        )

    @classmethod
    def forbidden(cls, message: str = "You are not allowed to access this model.") -> ErrorResponse:
        return cls(403, message, type="invalid_request_error", code="model_not_allowed")

    @classmethod
    def forbidden_quota(cls) -> ErrorResponse:
        return cls(403, "Your organization has no remaining billing quota.", type="billing_error", code=None)

    @classmethod
    def context_length_exceeded(cls, *, with_code: bool = True) -> ErrorResponse:
        return cls(
            400,
            "This model's maximum context length is 8192 tokens. However, your messages resulted in "
            "9100 tokens. Please reduce the length of the messages.",
            type="invalid_request_error",
            code="context_length_exceeded" if with_code else None,
        )

    @classmethod
    def bad_request(cls, message: str = "Invalid value for 'temperature'.") -> ErrorResponse:
        return cls(400, message, type="invalid_request_error", code="invalid_value")

    @classmethod
    def model_not_found(cls) -> ErrorResponse:
        return cls(
            404, "The model `nope` does not exist.", type="invalid_request_error", code="model_not_found"
        )

    @classmethod
    def server_error(cls, status: int = 500) -> ErrorResponse:
        return cls(status, "The server had an error while processing your request.", type="server_error")


@dataclass
class RawStream:
    """Verbatim body blocks (e.g. hand-written SSE), each sent as its own write."""

    blocks: list[str]
    status: int = 200
    content_type: str = "text/event-stream; charset=utf-8"
    chunk_delay: float = 0.0


ScriptedResponse = Completion | ErrorResponse | RawStream


def split(text: str, size: int) -> list[str]:
    """`text` in `size`-character pieces."""
    return [text[i : i + size] for i in range(0, len(text), size)]


def sse(data: str) -> bytes:
    return f"data: {data}\n\n".encode()


# -- the ASGI side ------------------------------------------------------------------------


class _BlockStream(Response):
    """Writes pre-rendered blocks with delays; `abort` ends without the final empty body
    message, which makes uvicorn drop the connection (the client sees a truncated body)."""

    def __init__(
        self,
        blocks: list[bytes],
        *,
        status: int = 200,
        content_type: str = "text/event-stream; charset=utf-8",
        first_delay: float = 0.0,
        delay: float = 0.0,
        abort: bool = False,
        pauses: dict[int, float] | None = None,
        gate: tuple[int, threading.Event] | None = None,
        sent_at: list[float] | None = None,
    ) -> None:
        self.blocks = blocks
        self.status_code = status
        self.content_type = content_type
        self.first_delay = first_delay
        self.delay = delay
        self.abort = abort
        self.pauses = pauses or {}  # block index → seconds of silence before it
        self.gate = gate  # (block index, event): that block waits for the event
        self.sent_at = sent_at
        self.background = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        disconnected = asyncio.Event()

        async def watch() -> None:
            # Notice a client that gave up (e.g. a first-token timeout), so delays end early.
            while (await receive())["type"] != "http.disconnect":
                pass
            disconnected.set()

        watcher = asyncio.create_task(watch())
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": self.status_code,
                    "headers": [
                        (b"content-type", self.content_type.encode()),
                        (b"cache-control", b"no-cache"),
                    ],
                }
            )
            for i, block in enumerate(self.blocks):
                if self.gate is not None and self.gate[0] == i:
                    gate = self.gate[1]
                    while not gate.is_set():  # the test's thread sets it; polled, not blocking our loop
                        if disconnected.is_set():
                            return
                        await asyncio.sleep(0.005)
                pause = self.pauses.get(i, self.first_delay if i == 0 else self.delay)
                if pause > 0:
                    try:
                        await asyncio.wait_for(disconnected.wait(), pause)
                        return  # the client is gone
                    except TimeoutError:
                        pass
                await send({"type": "http.response.body", "body": block, "more_body": True})
                if self.sent_at is not None:
                    self.sent_at.append(time.perf_counter())
            if not self.abort:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            watcher.cancel()


class FakeOpenAI(ScriptedServer[ScriptedResponse]):
    """A scripted OpenAI-compatible server. Sync (`with`) and async (`async with`) usable.

    `responses` are consumed in order, one per request; when the queue is empty the
    `default` response is served (if any), else a 500 explaining that the script ran out.
    A body the official `openai` package's request types reject gets a 400, as from the
    real API (`validate=False` switches that off).
    """

    def __init__(
        self,
        responses: list[ScriptedResponse] | None = None,
        *,
        default: ScriptedResponse | None = None,
        validate: bool = True,
    ) -> None:
        self.validate = validate
        super().__init__(responses, default=default)
        # `GET /v1/models`: these model objects (`id` and any extra fields, e.g. vLLM's
        # `max_model_len`), or an error with `models_status`. Its requests are recorded apart
        # (`models_requests`), so the scripted-completion bookkeeping is not disturbed.
        self.models: list[dict[str, Any]] = []
        self.models_status = 200
        self.models_requests: list[RecordedRequest] = []
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._handle, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
            ]
        )

    async def _models(self, request: Request) -> Response:
        self.models_requests.append(RecordedRequest(request.url.path, dict(request.headers.items()), None))
        if self.models_status != 200:
            error = {"message": "FakeOpenAI: models unavailable", "type": "server_error"}
            return JSONResponse({"error": error}, status_code=self.models_status)
        data = [{"object": "model", "created": 1700000000, "owned_by": "fake", **m} for m in self.models]
        return JSONResponse({"object": "list", "data": data})

    @property
    def base_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}/v1"

    async def _handle(self, request: Request) -> Response:
        body = await self._record(request)
        problem = chat_body_error(body) if self.validate else None
        if problem is not None:
            return JSONResponse(
                {"error": {"message": f"FakeOpenAI: invalid body: {problem}", "type": "invalid_request"}},
                status_code=400,
            )
        script = self._next()
        if script is None:
            return JSONResponse(
                {"error": {"message": "FakeOpenAI: no scripted response left", "type": "server_error"}},
                status_code=500,
            )
        if isinstance(script, ErrorResponse):
            return JSONResponse(script.to_json(), status_code=script.status, headers=script.headers)
        if isinstance(script, RawStream):
            blocks = [b.encode() for b in script.blocks]
            return _BlockStream(
                blocks, status=script.status, content_type=script.content_type, delay=script.chunk_delay
            )
        if not (isinstance(body, dict) and body.get("stream") is True):
            return JSONResponse(
                {
                    "error": {
                        "message": "FakeOpenAI only serves stream: true",
                        "type": "invalid_request_error",
                    }
                },
                status_code=400,
            )
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        return _BlockStream(
            script.wire_blocks(include_usage=include_usage),
            first_delay=script.first_chunk_delay,
            delay=script.chunk_delay,
            abort=script.cut_after is not None and script.cut_abruptly,
            pauses={script.stall_after: script.stall_s} if script.stall_after is not None else None,
            gate=(script.gate_after, script.gate)
            if script.gate_after is not None and script.gate is not None
            else None,
            sent_at=script.sent_at,
        )

    thread_name = "fake-openai"

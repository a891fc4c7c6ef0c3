"""A real local HTTP server speaking the Anthropic Messages streaming wire format.

Same design as `tests.support.fakes.openai_server.FakeOpenAI`: uvicorn on 127.0.0.1 (a free port)
in a background thread, so clients exercise real sockets, real chunked transfer and real
connection drops. Responses are scripted in order:

    async with FakeAnthropic([StreamedMessage([TextBlock.from_text("Hello world")])]) as fake:
        fake.enqueue(ErrorResponse.overloaded())
        provider = AnthropicProvider(base_url=fake.base_url, api_key="sk-ant-test", model="m")
        ...
        fake.requests[0].body["messages"]

Script types: `StreamedMessage` (a normal event stream of text / thinking /
redacted_thinking / tool_use blocks, optionally with delays, a cut, a malformed event or an
in-stream `error` event),
`ErrorResponse` (an HTTP error with Anthropic's JSON error body and headers) and
`RawStream` (verbatim bytes, for wire-format edge cases).

Like the real API, the fake rejects requests without `x-api-key` (401) or
`anthropic-version` (400), and — unless `strict=False` — bodies the real API would refuse
(missing fields, broken user/assistant alternation, empty text blocks, a tool_result whose
tool_use is not in the previous assistant message, anything the official `anthropic`
package's request types refuse, too many cache breakpoints, a thinking block edited, made up
or missing where thinking requires it — see `anthropic_validation.py`), so translation bugs
fail loudly.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.support.fakes.anthropic_validation import REDACTED_PREFIX, sign, validate_body
from tests.support.fakes.openai_server import RawStream, _BlockStream, split
from tests.support.fakes.threaded import RecordedRequest, ScriptedServer

__all__ = [
    "ErrorResponse",
    "FakeAnthropic",
    "RawStream",
    "RecordedRequest",
    "RedactedThinkingBlock",
    "StreamedMessage",
    "TextBlock",
    "ThinkingBlock",
    "ToolUseBlock",
    "UsageScript",
    "split",
    "sse_event",
]

# -- scripted responses ------------------------------------------------------------------


@dataclass
class TextBlock:
    """A text content block streamed as one `text_delta` per piece."""

    pieces: list[str]

    @classmethod
    def from_text(cls, text: str, *, chunk_size: int = 4) -> TextBlock:
        return cls(split(text, chunk_size))


@dataclass
class ThinkingBlock:
    """An extended-thinking block: `thinking_delta`s then one `signature_delta`, as the API
    does. The default signature is the one the fake accepts back for this text."""

    pieces: list[str]
    signature: str | None = None

    def signed(self) -> str:
        return sign("".join(self.pieces)) if self.signature is None else self.signature

    def wire(self) -> dict[str, str]:
        """The block as the API returns it (and wants it back)."""
        return {"type": "thinking", "thinking": "".join(self.pieces), "signature": self.signed()}


@dataclass
class RedactedThinkingBlock:
    """Thinking the safety systems encrypted: one `content_block_start` with opaque `data`."""

    data: str = REDACTED_PREFIX + "FakeEncryptedThinking"

    def wire(self) -> dict[str, str]:
        return {"type": "redacted_thinking", "data": self.data}


@dataclass
class ToolUseBlock:
    """A tool_use block; its input JSON text streams as `input_json_delta` fragments of
    `fragment_size` characters, after the empty first fragment the real API sends."""

    id: str
    name: str
    input_json: str
    fragment_size: int = 8

    def fragments(self) -> list[str]:
        return ["", *split(self.input_json, max(1, self.fragment_size))]


Block = TextBlock | ThinkingBlock | RedactedThinkingBlock | ToolUseBlock


@dataclass
class UsageScript:
    input_tokens: int = 10
    output_tokens: int = 5
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    def start_json(self) -> dict[str, Any]:
        """`message_start` usage: the input side is final, output_tokens is a small placeholder."""
        return {
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": self.cache_creation_input_tokens,
                "ephemeral_1h_input_tokens": 0,
            },
            "output_tokens": 1,
            "service_tier": "standard",
        }

    def delta_json(self, *, full: bool) -> dict[str, Any]:
        """`message_delta` usage: cumulative output_tokens (newer API versions repeat the rest)."""
        if not full:
            return {"output_tokens": self.output_tokens}
        return {
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "output_tokens": self.output_tokens,
        }


@dataclass
class StreamedMessage:
    """A 200 streamed message, event by event as the Messages API sends it.

    Event order: `message_start`, a `ping` (if `ping`), per block `content_block_start`,
    its deltas and `content_block_stop`, then `message_delta` (stop_reason + usage) and
    `message_stop`. Faults, counted in events (`events()` shows the numbering):
    `cut_after=N` sends only the first N events and ends the body (`cut_abruptly=True`
    drops the TCP connection instead); `malformed_after=N` inserts an event with non-JSON
    data after N events; `error_after=N` sends an `error` event after N events and ends
    the stream, as the API does when it fails mid-stream (e.g. overloaded).
    """

    blocks: list[Block] = field(default_factory=list)
    stop_reason: str | None = None  # None: "tool_use" if there are tool_use blocks, else "end_turn"
    usage: UsageScript = field(default_factory=UsageScript)
    full_delta_usage: bool = False
    ping: bool = True
    model: str = "claude-fake-4"
    first_event_delay: float = 0.0  # seconds before the first event (headers go out at once)
    event_delay: float = 0.0  # seconds between events
    cut_after: int | None = None
    cut_abruptly: bool = False
    malformed_after: int | None = None
    error_after: int | None = None
    error_type: str = "overloaded_error"
    error_message: str = "Overloaded"

    @classmethod
    def from_text(cls, text: str, *, chunk_size: int = 4, **kwargs: Any) -> StreamedMessage:
        return cls([TextBlock.from_text(text, chunk_size=chunk_size)], **kwargs)

    def events(self) -> list[tuple[str, dict[str, Any]]]:
        """(event name, data) pairs this script streams, before any fault is applied."""
        message = {
            "id": "msg_01FakeAnthropicMessage",
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": self.usage.start_json(),
        }
        out: list[tuple[str, dict[str, Any]]] = [("message_start", {"message": message})]
        if self.ping:
            out.append(("ping", {}))
        for index, block in enumerate(self.blocks):
            out += _block_events(index, block)
        stop_reason = self.stop_reason or (
            "tool_use" if any(isinstance(b, ToolUseBlock) for b in self.blocks) else "end_turn"
        )
        out.append(
            (
                "message_delta",
                {
                    "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                    "usage": self.usage.delta_json(full=self.full_delta_usage),
                },
            )
        )
        out.append(("message_stop", {}))
        return [(name, {"type": name, **data}) for name, data in out]

    def wire_blocks(self) -> list[bytes]:
        blocks = [sse_event(name, json.dumps(data, separators=(",", ":"))) for name, data in self.events()]
        if self.error_after is not None:
            error = {"type": "error", "error": {"type": self.error_type, "message": self.error_message}}
            blocks = [*blocks[: self.error_after], sse_event("error", json.dumps(error))]
        if self.malformed_after is not None:
            blocks.insert(
                self.malformed_after,
                sse_event("content_block_delta", '{"type":"content_block_delta","index":0,"delta":{"ty'),
            )
        if self.cut_after is not None:
            blocks = blocks[: self.cut_after]
        return blocks


def _block_events(index: int, block: Block) -> list[tuple[str, dict[str, Any]]]:
    start: dict[str, Any]
    deltas: list[dict[str, Any]]
    if isinstance(block, TextBlock):
        start = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": piece} for piece in block.pieces]
    elif isinstance(block, ThinkingBlock):
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [{"type": "thinking_delta", "thinking": piece} for piece in block.pieces]
        deltas.append({"type": "signature_delta", "signature": block.signed()})
    elif isinstance(block, RedactedThinkingBlock):
        start, deltas = block.wire(), []
    else:
        start = {"type": "tool_use", "id": block.id, "name": block.name, "input": {}}
        deltas = [{"type": "input_json_delta", "partial_json": piece} for piece in block.fragments()]
    return [
        ("content_block_start", {"index": index, "content_block": start}),
        *(("content_block_delta", {"index": index, "delta": delta}) for delta in deltas),
        ("content_block_stop", {"index": index}),
    ]


@dataclass
class ErrorResponse:
    """An HTTP error with Anthropic's JSON error envelope (or a verbatim `body`)."""

    status: int
    type: str = "api_error"
    message: str = "error"
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None  # overrides the {"type": "error", "error": {...}} envelope when set
    request_id: str = "req_011CFakeRequestId"

    def to_json(self) -> Any:
        if self.body is not None:
            return self.body
        return {
            "type": "error",
            "error": {"type": self.type, "message": self.message},
            "request_id": self.request_id,
        }

    def all_headers(self) -> dict[str, str]:
        return {"request-id": self.request_id, "x-should-retry": "false", **self.headers}

    @classmethod
    def rate_limited(cls, *, retry_after: int | str | None = None) -> ErrorResponse:
        headers = {"x-should-retry": "true"}
        if retry_after is not None:
            headers["retry-after"] = str(retry_after)
        return cls(
            429,
            "rate_limit_error",
            "This request would exceed the rate limit for your organization of 50 input tokens per minute.",
            headers=headers,
        )

    @classmethod
    def overloaded(cls) -> ErrorResponse:
        return cls(529, "overloaded_error", "Overloaded", headers={"x-should-retry": "true"})

    @classmethod
    def api_error(cls, status: int = 500) -> ErrorResponse:
        return cls(status, "api_error", "Internal server error", headers={"x-should-retry": "true"})

    @classmethod
    def unauthorized(cls) -> ErrorResponse:
        return cls(401, "authentication_error", "invalid x-api-key")

    @classmethod
    def permission_denied(cls) -> ErrorResponse:
        return cls(
            403, "permission_error", "Your API key does not have permission to use the specified resource."
        )

    @classmethod
    def permission_billing(cls) -> ErrorResponse:
        return cls(
            403,
            "permission_error",
            "This organization has been disabled due to a billing issue. Please check Plans & Billing.",
        )

    @classmethod
    def prompt_too_long(cls) -> ErrorResponse:
        return cls(400, "invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum")

    @classmethod
    def context_limit(cls) -> ErrorResponse:
        return cls(
            400,
            "invalid_request_error",
            "input length and `max_tokens` exceed context limit: 197000 + 8192 > 200000, "
            "decrease input length or `max_tokens` and try again",
        )

    @classmethod
    def credit_too_low(cls) -> ErrorResponse:
        return cls(
            400,
            "invalid_request_error",
            "Your credit balance is too low to access the Anthropic API. "
            "Please go to Plans & Billing to upgrade or purchase credits.",
        )

    @classmethod
    def bad_request(cls, message: str = "temperature: range: 0..1") -> ErrorResponse:
        return cls(400, "invalid_request_error", message)

    @classmethod
    def not_found(cls) -> ErrorResponse:
        return cls(404, "not_found_error", "model: claude-nope")

    @classmethod
    def request_too_large(cls) -> ErrorResponse:
        return cls(413, "request_too_large", "Request exceeds the maximum allowed number of bytes.")


ScriptedResponse = StreamedMessage | ErrorResponse | RawStream


def sse_event(name: str, data: str) -> bytes:
    return f"event: {name}\ndata: {data}\n\n".encode()


def _error(status: int, err_type: str, message: str) -> JSONResponse:
    return JSONResponse(
        {"type": "error", "error": {"type": err_type, "message": message}, "request_id": "req_fake_rejected"},
        status_code=status,
    )


# -- the server -----------------------------------------------------------------------------


class FakeAnthropic(ScriptedServer[ScriptedResponse]):
    """A scripted Anthropic Messages server. Sync (`with`) and async (`async with`) usable.

    `responses` are consumed in order, one per accepted request; when the queue is empty
    the `default` response is served (if any), else a 500 explaining that the script ran
    out. Requests the real API would reject are answered with its error and consume nothing.
    """

    def __init__(
        self,
        responses: list[ScriptedResponse] | None = None,
        *,
        default: ScriptedResponse | None = None,
        strict: bool = True,
    ) -> None:
        self.strict = strict
        super().__init__(responses, default=default)
        # `GET /v1/models`, paged as the real API pages it (`limit`, `after_id`, `has_more`,
        # `last_id`), at most `models_page_size` a page; `models_status` answers an error.
        self.models: list[dict[str, Any]] = []
        self.models_status = 200
        self.models_page_size = 1000
        self.models_requests: list[RecordedRequest] = []
        self.app = Starlette(
            routes=[
                Route("/v1/messages", self._handle, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
            ]
        )

    async def _models(self, request: Request) -> Response:
        self.models_requests.append(
            RecordedRequest(request.url.path, dict(request.headers.items()), dict(request.query_params))
        )
        if not request.headers.get("x-api-key"):
            return _error(401, "authentication_error", "x-api-key header is required")
        if not request.headers.get("anthropic-version"):
            return _error(400, "invalid_request_error", "anthropic-version: header is required")
        if self.models_status != 200:
            return _error(self.models_status, "api_error", "FakeAnthropic: models unavailable")
        ids = [m["id"] for m in self.models]
        after = request.query_params.get("after_id")
        start = ids.index(after) + 1 if after in ids else 0
        size = min(int(request.query_params.get("limit", "20")), self.models_page_size)
        page = [
            {"type": "model", "created_at": "2025-05-14T00:00:00Z", "display_name": m["id"], **m}
            for m in self.models[start : start + size]
        ]
        return JSONResponse(
            {
                "data": page,
                "has_more": start + size < len(ids),
                "first_id": page[0]["id"] if page else None,
                "last_id": page[-1]["id"] if page else None,
            }
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _handle(self, request: Request) -> Response:
        body = await self._record(request)
        if not request.headers.get("x-api-key"):
            return _error(401, "authentication_error", "x-api-key header is required")
        if not request.headers.get("anthropic-version"):
            return _error(400, "invalid_request_error", "anthropic-version: header is required")
        if self.strict:
            problem = validate_body(body)
            if problem is None and body.get("stream") is not True:
                problem = "FakeAnthropic only serves stream: true"
            if problem is not None:
                return _error(400, "invalid_request_error", problem)
        script = self._next()
        if script is None:
            return _error(500, "api_error", "FakeAnthropic: no scripted response left")
        if isinstance(script, ErrorResponse):
            return JSONResponse(script.to_json(), status_code=script.status, headers=script.all_headers())
        if isinstance(script, RawStream):
            blocks = [b.encode() for b in script.blocks]
            return _BlockStream(
                blocks, status=script.status, content_type=script.content_type, delay=script.chunk_delay
            )
        return _BlockStream(
            script.wire_blocks(),
            first_delay=script.first_event_delay,
            delay=script.event_delay,
            abort=script.cut_after is not None and script.cut_abruptly,
        )

    thread_name = "fake-anthropic"

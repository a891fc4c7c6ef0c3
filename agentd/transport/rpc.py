"""The one JSON-RPC path every transport uses (R-P4): decode → (batch) → initialize gate →
depth → envelope → rate limit → params → handler → error mapping.

A method is a params model plus an async handler. The dispatcher validates the
envelope and the params (pydantic → -32602 with readable `data`), calls the handler
and turns every failure into an error response; it never raises. Transports are adapters:
they frame bytes (size limits, WebSocket/SSE/lines/HTTP bodies) and call `read_message`
then `Dispatcher.answer` (POST /rpc) or `Dispatcher.handle` per message (`Connection`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import BaseModel, ValidationError

from agentd.core import limit_exceeded
from agentd.infra import overload_error
from agentd.protocol import ErrorCode, Request, RpcError, Served, error_response
from agentd.session import SessionError, SessionErrorKind
from agentd.store import until
from agentd.transport.errors import rpc_error
from agentd.transport.guards import check_depth, check_prompt_blocks, prompt_of, request_cost
from agentd.transport.state import CallContext, RouteHook

log = logging.getLogger(__name__)


Handler = Callable[[CallContext, Any], Awaitable[Any]]


@dataclass(frozen=True)
class Method:
    params: type[BaseModel] | None
    handler: Handler
    needs_connection: bool = False  # sends server→client requests or streams replays


def validation_data(exc: ValidationError) -> list[dict[str, Any]]:
    return [
        {
            "path": ".".join(str(p) for p in err["loc"]) or "params",
            "message": err["msg"].removeprefix("Value error, "),
        }
        for err in exc.errors(include_url=False)
    ]


def describe(exc: ValidationError) -> str:
    first = validation_data(exc)[0]
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"Invalid params: {first['path']}: {first['message']}{more}"


def read_message(data: str | bytes) -> Any:
    """A frame's JSON: a message, a non-empty batch, or the RpcError to answer (with id null)
    when it is not JSON or an empty batch."""
    try:
        raw = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        return RpcError(ErrorCode.PARSE_ERROR, f"Parse error: {exc}")
    if isinstance(raw, list) and not raw:
        return RpcError(ErrorCode.INVALID_REQUEST, "empty batch")
    return raw


# `Request.model_validate` without its Python wrapper: the same validator, one call.
_REQUEST: Callable[[Any], Request] = Request.__pydantic_validator__.validate_python


# The envelope of a JSON object checked by hand (`_plain_envelope`), pydantic's `Request`
# only for what that does not pass. Off: every message through `Request` (tests run both).
HAND_ENVELOPE = True


def _plain_envelope(raw: dict[str, Any]) -> bool:
    """Whether `Request` takes this decoded JSON object unchanged: `jsonrpc` "2.0", a string
    `method`, `params` an object, array or null, `id` an integer, string or null, nothing
    else. Exact types (orjson makes no subclasses); a near miss — a float id, a missing
    field, an extra one — answers False and goes to pydantic for its verdict and errors."""
    if "jsonrpc" not in raw or raw["jsonrpc"] != "2.0":
        return False
    if "method" not in raw or type(raw["method"]) is not str:
        return False
    size = 2
    if "params" in raw:
        kind = type(raw["params"])
        if kind is not dict and kind is not list and raw["params"] is not None:
            return False
        size += 1
    if "id" in raw:
        kind = type(raw["id"])
        if kind is not int and kind is not str and raw["id"] is not None:
            return False
        size += 1
    return len(raw) == size


def parse_envelope(raw: Any) -> Request | RpcError:
    if not isinstance(raw, dict):
        return RpcError(ErrorCode.INVALID_REQUEST, "Invalid Request: a JSON-RPC message must be an object")
    try:
        return _REQUEST(raw)
    except ValidationError as exc:
        return RpcError(ErrorCode.INVALID_REQUEST, "Invalid Request", validation_data(exc))


def raw_id(raw: Any) -> Any:
    """The id of a message we could not parse, if it has a usable one."""
    if isinstance(raw, dict):
        value = raw.get("id")
        if isinstance(value, (int, str)) and not isinstance(value, bool):
            return value
    return None


def response_problem(raw: dict[str, Any]) -> str | None:
    """Why a client→server response frame is malformed (None when it is well formed): its
    id must be an integer, a string or null, and an `error` an object with an integer code."""
    rid = raw.get("id")
    if rid is not None and (not isinstance(rid, (int, str)) or isinstance(rid, bool)):
        kind = type(rid).__name__
        return f"Invalid Request: a response id must be an integer, a string or null, not {kind}"
    err = raw.get("error")
    if err is None:
        return None
    if not isinstance(err, dict):
        return "Invalid Request: a response's error must be an object"
    code = err.get("code")
    if not isinstance(code, int) or isinstance(code, bool):
        return "Invalid Request: a response's error code must be an integer"
    return None


def _is_notification(raw: Any) -> bool:
    return isinstance(raw, dict) and "id" not in raw


def _before_initialize(raw: Any, ctx: CallContext) -> Request | None:
    """On a connection `initialize` must come first: the well-formed request (or notification)
    that comes before it, else None. Over `POST /rpc` (no connection) there is no such rule."""
    conn = ctx.connection
    if conn is None or conn.initialized:
        return None
    parsed = parse_envelope(raw)
    if isinstance(parsed, RpcError) or parsed.method == Served.INITIALIZE:
        return None
    return parsed


class Dispatcher:
    def __init__(self, methods: Mapping[str, Method], unsupported: Mapping[str, str] | None = None) -> None:
        self.methods = methods
        # ACP methods agentd deliberately does not implement → why (said in the error).
        self.unsupported = unsupported or {}
        self.route: RouteHook | None = None  # set when this replica routes (Postgres)
        # Methods found so far (the table may be a `Mapping` that loads on first use, whose
        # `get` is Python code: a plain dict answers a method's later calls in one look-up).
        self._found: dict[str, Method] = {}

    def resolve(self, name: str, params: Any, ctx: CallContext) -> tuple[Method, Any]:
        """A request's method and its validated params; raises RpcError (unknown or
        unsupported method, no connection for one that needs it, invalid params)."""
        found = self._found
        method = found[name] if name in found else self.methods.get(name)
        if method is not None:
            found[name] = method
        else:
            why = self.unsupported.get(name)
            if why is not None:
                raise RpcError(
                    ErrorCode.METHOD_NOT_FOUND,
                    f"Method not found: {name} is not supported: {why}",
                    {"reason": "unsupported"},
                )
            raise RpcError.method_not_found(name)
        if method.needs_connection and ctx.connection is None:
            raise RpcError(ErrorCode.INVALID_REQUEST, f"{name} needs a WebSocket connection (GET /acp)")
        if method.params is not None:
            if params is None:  # JSON-RPC lets a request omit params
                params = {}
            if type(params) is not dict:  # (the envelope's validated `params`: a dict or a list)
                raise RpcError.invalid_params(
                    "Invalid params: expected an object",
                    [{"path": "params", "message": "expected an object"}],
                )
            try:
                params = method.params.__pydantic_validator__.validate_python(params)
            except ValidationError as exc:
                raise RpcError.invalid_params(describe(exc), validation_data(exc)) from None
        return method, params

    async def call(self, request: Request, ctx: CallContext) -> Any:
        """Run one request; returns the result or raises RpcError."""
        method, params = self.resolve(request.method, request.params, ctx)
        try:
            return await method.handler(ctx, params)
        except SessionError as exc:
            # `owned_elsewhere` comes from `SessionManager.get`, before a handler changes
            # anything: the very request can go to the owner (agentd/transport/routed.py).
            if self.route is None or exc.kind is not SessionErrorKind.OWNED_ELSEWHERE or ctx.routed:
                raise
            return await self.route(ctx, request, exc)

    async def answer(self, raw: Any, ctx: CallContext) -> dict[str, Any] | list[dict[str, Any]] | None:
        """A decoded message or batch (see `read_message`) → its response, the list of a
        batch's responses, or None when nothing is to be answered (only notifications)."""
        if isinstance(raw, list):
            return await self.handle_batch(raw, ctx) or None
        return await self.handle(raw, ctx)

    async def handle_batch(self, items: list[Any], ctx: CallContext) -> list[dict[str, Any]]:
        """A batch's items run concurrently; the responses keep the batch's order."""
        responses = await asyncio.gather(*(self.handle(item, ctx) for item in items))
        return [r for r in responses if r is not None]

    async def handle(self, raw: Any, ctx: CallContext, *, shallow: bool = False) -> dict[str, Any] | None:
        """One incoming message → its response (None for notifications). `shallow`: the
        caller knows it nests no deeper than `max_json_depth` (`within_depth`), so no walk."""
        conn = ctx.connection
        if conn is not None and not conn.initialized:  # (`_before_initialize`'s own first test)
            early = _before_initialize(raw, ctx)
            if early is not None:  # refused; a notification silently
                if early.is_notification:
                    return None
                err = RpcError(
                    ErrorCode.INVALID_REQUEST, "Invalid Request: `initialize` must be the first request"
                )
                return error_response(raw_id(raw), err)
        settings = ctx.state.settings
        prompt = prompt_of(raw)
        blocks = settings.max_prompt_blocks  # O(1): before any walk
        if prompt is not None and blocks and len(prompt) > blocks:
            too_many = check_prompt_blocks(prompt, blocks)
            if too_many is not None:
                return None if _is_notification(raw) else error_response(raw_id(raw), too_many)
        # Charged by cost (a large prompt draws what validating and storing it costs) before
        # anything walks the message: a flood is refused for the price of its parse. A
        # cancel is never rate-limited: it is how a client stops the work it started.
        if not (type(raw) is dict and "method" in raw and raw["method"] == Served.SESSION_CANCEL):
            wait = ctx.state.rate_limiter.allow(ctx.rate_key, request_cost(prompt))
            if wait is not None:
                err = limit_exceeded(
                    "rate",
                    settings.rate_limit_per_s,
                    f"rate limit: retry in {wait:.2f}s",
                    retryAfter=round(wait, 3),
                )
                return None if _is_notification(raw) else error_response(raw_id(raw), err)
        too_deep = None if shallow else check_depth(raw, settings.max_json_depth)
        if too_deep is not None:
            return error_response(raw_id(raw), too_deep)
        parsed: Request | None = None
        if HAND_ENVELOPE and type(raw) is dict and _plain_envelope(raw):
            # A well-formed envelope, told by hand: no `Request` is built (one is made only
            # to route the request to its session's owner); pydantic judges anything else,
            # so a malformed one gets its errors word for word.
            name: str = raw["method"]
            params: Any = raw["params"] if "params" in raw else None
            rid: Any = raw["id"] if "id" in raw else None
        else:
            if type(raw) is dict:  # (`parse_envelope`, written out for a JSON object: its one call)
                try:
                    parsed = _REQUEST(raw)
                except ValidationError as exc:
                    invalid = RpcError(ErrorCode.INVALID_REQUEST, "Invalid Request", validation_data(exc))
                    return error_response(raw_id(raw), invalid)
            else:
                refused = parse_envelope(raw)
                if isinstance(refused, RpcError):
                    return error_response(raw_id(raw), refused)
                parsed = refused
            name, params, rid = parsed.method, parsed.params, parsed.id
        # (`parsed.is_notification`, read from the message itself: no pydantic property call)
        notify = "id" not in raw
        try:
            with until(time.monotonic() + settings.request_deadline_s):  # its database waits
                if parsed is not None:
                    result = await self.call(parsed, ctx)
                else:
                    # `call` written out (one coroutine level fewer on every resumption of
                    # the handler): a known method's params validated here, the rest by `resolve`.
                    found = self._found
                    method = found[name] if name in found else None
                    if (
                        method is None
                        or method.params is None
                        or type(params) is not dict
                        or (method.needs_connection and ctx.connection is None)
                    ):
                        method, params = self.resolve(name, params, ctx)
                    else:
                        try:
                            params = method.params.__pydantic_validator__.validate_python(params)
                        except ValidationError as exc:
                            raise RpcError.invalid_params(describe(exc), validation_data(exc)) from None
                    try:
                        result = await method.handler(ctx, params)
                    except SessionError as exc:  # (as in `call`: to the owner, else raised)
                        route = self.route
                        if route is None or exc.kind is not SessionErrorKind.OWNED_ELSEWHERE or ctx.routed:
                            raise
                        result = await route(ctx, _REQUEST(raw), exc)
        except RpcError as err:
            return None if notify else error_response(rid, err)
        except SessionError as exc:  # the session's own errors get their wire codes here
            return None if notify else error_response(rid, rpc_error(exc))
        except Exception as exc:
            overloaded = overload_error(exc)  # a saturated database: retryable, not a bug
            if overloaded is not None:
                log.warning("method %s: %s (%s)", name, overloaded.message, exc)
            else:
                log.exception("method %s failed", name)
            failure = overloaded or RpcError(
                ErrorCode.INTERNAL_ERROR,
                f"Internal error while handling {name}",
                {"reason": "internal", "retryable": False},  # a bug: the same request fails again
            )
            return None if notify else error_response(rid, failure)
        if notify:
            return None
        # (`response(...)` written out: the dict it makes)
        return {"jsonrpc": "2.0", "id": rid, "result": {} if result is None else result}

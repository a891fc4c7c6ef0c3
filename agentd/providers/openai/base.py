"""What OpenAI's two wire formats (Chat Completions, Responses) share: the base URL as given
(it ends in /v1), the reasoning effort, the error classification, and the body encoded
around the session's cached conversation (`wire_cache`).

Per sampling only the conversation's new messages are encoded: the bytes of the rest of the
body (model, system prompt, tools, options) are kept per session (`KeptBody`) and reused
while the request's other fields equal the last one's (issue 32: they were composed and
encoded again on every call, the tools' schemas included)."""

from __future__ import annotations

from abc import abstractmethod
from operator import attrgetter
from typing import Any, Unpack

from agentd.core import ProviderRequest
from agentd.infra import ReasoningEffort
from agentd.providers.http import HttpOptions, HttpProvider
from agentd.providers.openai.errors import classify_http_error
from agentd.providers.wire_cache import (
    MAX_SESSIONS,
    EncodedMessages,
    KeptBody,
    KeptTools,
    Spliced,
    keep_body,
    wire_pieces,
)

__all__ = ["OpenAIHttpProvider"]

# A tool as the body's key compares it (C only: no dataclass `__eq__` per tool).
_TOOL_FIELDS = attrgetter("name", "description", "parameters")


class OpenAIHttpProvider(HttpProvider):
    """An OpenAI endpoint + model; subclasses build the body (`build_body`, and `_compose`
    around `_conversation`, the messages' cached bytes)."""

    supports_native_schema = True
    classify = classify_http_error

    def __init__(
        self, *, base_url: str, reasoning_effort: ReasoningEffort | None = None, **http: Unpack[HttpOptions]
    ) -> None:
        super().__init__(base_url=base_url.rstrip("/"), **http)
        self.reasoning_effort = reasoning_effort
        self._encoded = EncodedMessages()  # per session: the conversation's wire bytes
        self._tools = KeptTools()  # the last request's tools, encoded
        self._bodies: dict[str | None, KeptBody] = {}  # per session: the bytes around its conversation

    def forget_session(self, session_id: str) -> None:
        """Drop what is kept for the session (its conversation's wire bytes): it was unloaded."""
        self._encoded.forget(session_id)
        self._bodies.pop(session_id, None)

    @abstractmethod
    def build_body(self, request: ProviderRequest) -> dict[str, Any]:
        """The JSON body for `request` (public so tests and debugging tools can inspect it)."""

    def encode_pieces(self, request: ProviderRequest) -> list[bytes]:
        """`build_body(request)` encoded in pieces, as the transport writes them (not joined),
        the conversation's bytes reused from the session's previous call (`wire_cache`), and
        the rest of the body's from its previous call with the same other fields."""
        # Everything `_compose` reads but the conversation (equal values encode alike: the
        # schemas are the tools' own dicts, never mutated in place — see `KeptTools`).
        key = (
            request.model or self.model,
            request.system,
            list(map(_TOOL_FIELDS, request.tools)),
            request.output_schema,
            request.max_output_tokens,
            self.reasoning_effort,
        )
        session = request.session_id
        kept = self._bodies.get(session)
        if kept is not None and kept.key == key:
            try:
                conversation = self._messages(request, kept.first)
            except TypeError:  # orjson refused a message (JSONEncodeError): the stdlib path below
                pass
            else:
                return [kept.head, *conversation.pieces, kept.tail]
        pieces = wire_pieces(
            lambda: self._compose(request, self._conversation(request)),
            lambda: self.build_body(request),
            self._tools,
        )
        self._keep(session, keep_body(key, self._first, self._compose, request, self._tools))
        return pieces

    def _keep(self, session: str | None, kept: KeptBody | None) -> None:
        bodies = self._bodies
        bodies.pop(session, None)
        if kept is not None:
            if len(bodies) >= MAX_SESSIONS:  # bounded as the conversations are (oldest first)
                del bodies[next(iter(bodies))]
            bodies[session] = kept

    def _forget_bodies(self) -> None:
        """What the server refused changed the bodies' options (`Amendments`)."""
        self._bodies.clear()

    def _conversation(self, request: ProviderRequest) -> Spliced:
        """The conversation's wire bytes, reused from the session's previous call."""
        return self._messages(request, self._first(request))

    @abstractmethod
    def _messages(self, request: ProviderRequest, first: bytes) -> Spliced:
        """`first` and the messages' wire items as one array (`self._encoded.array`)."""

    @abstractmethod
    def _compose(self, request: ProviderRequest, conversation: Any) -> dict[str, Any]:
        """The body with `conversation` (a list, or the cached `Spliced` bytes) in its place."""

    @abstractmethod
    def _first(self, request: ProviderRequest) -> bytes:
        """The wire items the conversation's array starts with (see `encode_items`), b"" for none."""

"""What OpenAI's two wire formats (Chat Completions, Responses) share: the base URL as given
(it ends in /v1), the reasoning effort, the error classification, and the body encoded
around the session's cached conversation (`wire_cache`)."""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, Unpack

from agentd.core import ProviderRequest
from agentd.infra import ReasoningEffort
from agentd.providers.http import HttpOptions, HttpProvider
from agentd.providers.openai.errors import classify_http_error
from agentd.providers.wire_cache import EncodedMessages, KeptTools, Spliced, wire_pieces

__all__ = ["OpenAIHttpProvider"]


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

    def forget_session(self, session_id: str) -> None:
        """Drop what is kept for the session (its conversation's wire bytes): it was unloaded."""
        self._encoded.forget(session_id)

    @abstractmethod
    def build_body(self, request: ProviderRequest) -> dict[str, Any]:
        """The JSON body for `request` (public so tests and debugging tools can inspect it)."""

    def encode_pieces(self, request: ProviderRequest) -> list[bytes]:
        """`build_body(request)` encoded in pieces, as the transport writes them (not joined),
        the conversation's bytes reused from the session's previous call (`wire_cache`)."""
        return wire_pieces(
            lambda: self._compose(request, self._conversation(request)),
            lambda: self.build_body(request),
            self._tools,
        )

    @abstractmethod
    def _compose(self, request: ProviderRequest, conversation: Any) -> dict[str, Any]:
        """The body with `conversation` (a list, or the cached `Spliced` bytes) in its place."""

    @abstractmethod
    def _conversation(self, request: ProviderRequest) -> Spliced:
        """The conversation's wire bytes, reused from the session's previous call."""

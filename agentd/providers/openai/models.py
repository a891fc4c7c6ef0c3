"""What differs between OpenAI models and OpenAI-compatible servers, decided in one place:
which field caps the output, whether a model reasons (and takes `reasoning_effort`), and
how to amend a request a server refused because of one optional parameter."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from agentd.core import ErrorKind, HarnessError
from agentd.infra import TokenField

# o1, o3-mini, o4-mini, gpt-5, gpt-5.1-codex, codex-mini..., optionally behind a router's
# "openai/" prefix; gpt-oss (served by vLLM & co.). gpt-5-chat models are the non-reasoning variants.
_REASONING_MODEL_RE = re.compile(
    r"^(?:[\w.-]+/)?(?:o\d|gpt-5(?!(?:\.\d+)?-chat)|gpt-oss|codex)", re.IGNORECASE
)

# A 400 that names a parameter as not accepted (OpenAI: "Unsupported parameter: 'max_tokens'
# is not supported with this model. Use 'max_completion_tokens' instead."; pydantic-based
# servers: "Extra inputs are not permitted"; others: "unrecognized"/"unknown" field).
_REJECTION_RE = re.compile(
    r"unsupported|not supported|unrecognized|unknown (?:field|param)|extra (?:inputs|fields)"
    r"|not permitted|unexpected",
    re.IGNORECASE,
)

_TOKEN_FIELDS = (TokenField.MAX_TOKENS.value, TokenField.MAX_COMPLETION_TOKENS.value)
# Optional parameters a server may refuse; dropping them loses a nicety, not the answer.
CHAT_DROPPABLE = ("stream_options", "reasoning_effort")


def is_reasoning_model(model: str) -> bool:
    return bool(_REASONING_MODEL_RE.match(model))


def is_openai_host(base_url: str) -> bool:
    return (urlsplit(base_url).hostname or "").lower() == "api.openai.com"


def token_field(setting: TokenField, *, base_url: str, model: str) -> str:
    """The Chat Completions field for the output cap. OpenAI deprecated `max_tokens` (and
    its reasoning models refuse it); many compatible servers only know `max_tokens`."""
    if setting is not TokenField.AUTO:
        return setting.value
    if is_openai_host(base_url) or is_reasoning_model(model):
        return TokenField.MAX_COMPLETION_TOKENS.value
    return TokenField.MAX_TOKENS.value


def _named(message: str, name: str) -> bool:
    return re.search(rf"(?<![A-Za-z_]){re.escape(name)}(?![A-Za-z_])", message) is not None


@dataclass
class Amendments:
    """What one model's server refused so far, applied to every later body for it."""

    droppable: tuple[str, ...] = CHAT_DROPPABLE
    token_field: str | None = None  # the field that worked after a switch
    dropped: set[str] = field(default_factory=set)

    def apply(self, body: dict[str, Any]) -> dict[str, Any]:
        out = dict(body)
        if self.token_field is not None:
            for name in _TOKEN_FIELDS:
                if name in out and name != self.token_field:
                    out[self.token_field] = out.pop(name)
        for name in self.dropped:
            out.pop(name, None)
        return out

    def learn(self, body: dict[str, Any], err: HarnessError) -> bool:
        """Amend for a refusal naming a parameter `body` has: switch the token field, or
        drop an optional parameter. False when `err` is no such refusal."""
        if err.kind is not ErrorKind.INVALID_REQUEST or not _REJECTION_RE.search(err.message):
            return False
        for name in _TOKEN_FIELDS:
            if name in body and _named(err.message, name):
                self.token_field = next(f for f in _TOKEN_FIELDS if f != name)
                return True
        for name in self.droppable:
            if name in body and _named(err.message, name):
                self.dropped.add(name)
                return True
        return False

"""The settings' choices (enums) and the defaults `agentd --help` shows, without pydantic:
the CLI's help and argument parsing need only these, and importing the settings model
(pydantic-settings) costs more than the rest of `agentd --help` together (issue 32)."""

from __future__ import annotations

from enum import StrEnum

CONFIG_ENV = "AGENTD_CONFIG"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
DEFAULT_MODEL = "gpt-4o-mini"


class ProviderName(StrEnum):
    OPENAI = "openai"  # Chat Completions (OpenAI and the compatible servers)
    OPENAI_RESPONSES = "openai-responses"  # OpenAI's Responses API
    ANTHROPIC = "anthropic"
    SCRIPTED = "scripted"


class TokenField(StrEnum):
    """Which Chat Completions field carries the output-token cap."""

    AUTO = "auto"  # max_completion_tokens on api.openai.com and for reasoning models, else max_tokens
    MAX_TOKENS = "max_tokens"
    MAX_COMPLETION_TOKENS = "max_completion_tokens"


class ReasoningEffort(StrEnum):
    """OpenAI's `reasoning_effort` / `reasoning.effort`; sent to reasoning models only."""

    NONE = "none"
    MINIMAL = "minimal"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    XHIGH = "xhigh"


class AuthMode(StrEnum):
    NONE = "none"  # every caller is the local user (refused off the loopback interface)
    TOKEN = "token"  # every request needs a bearer token (`agentd token create`)


class LogLevel(StrEnum):
    CRITICAL = "critical"
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"
    DEBUG = "debug"  # also shows the traceback behind a start-up error


class LogFormat(StrEnum):
    TEXT = "text"
    JSON = "json"  # one JSON object per line (structlog)


class HttpTransport(StrEnum):
    """The model calls' HTTP transport: agentd's lean HTTP/1.1 one, or httpx's own."""

    LEAN = "lean"
    HTTPX = "httpx"


class SandboxSetting(StrEnum):
    AUTO = "auto"  # bwrap when it is installed and works, else none (with a warning)
    BWRAP = "bwrap"  # bubblewrap or refuse to start
    NONE = "none"  # shell commands run unconfined


class SandboxNetwork(StrEnum):
    """Sandboxed commands always get a network namespace of their own (the host's loopback,
    agentd's API among it, is out of reach); this says whether they have a way out."""

    ON = "on"  # through agentd's egress proxy, to public addresses only (agentd/tools/shell/egress.py)
    OFF = "off"  # no network at all


# The principal of a server without authentication (AGENTD_AUTH=none): it owns every session.
LOCAL_PRINCIPAL = "local"

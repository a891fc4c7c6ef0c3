"""Shared infrastructure the layers above use: settings (`config`), authentication (`auth`),
logging (`logs`), Prometheus metrics (`metrics`), overload refusals (`overload`) and the OS
memory trimmer (`rss_trim`). Nothing here knows about sessions or the loop."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentd.infra.auth import CHALLENGE as CHALLENGE
    from agentd.infra.auth import LOCAL_PRINCIPAL as LOCAL_PRINCIPAL
    from agentd.infra.auth import Authenticator as Authenticator
    from agentd.infra.auth import AuthError as AuthError
    from agentd.infra.auth import AuthUnavailable as AuthUnavailable
    from agentd.infra.auth import Identity as Identity
    from agentd.infra.auth import chosen_subprotocol as chosen_subprotocol
    from agentd.infra.auth import create_token as create_token
    from agentd.infra.auth import insecure_bind as insecure_bind
    from agentd.infra.auth import parse_duration as parse_duration
    from agentd.infra.auth import team_names as team_names
    from agentd.infra.config import CONFIG_ENV as CONFIG_ENV
    from agentd.infra.config import AuthMode as AuthMode
    from agentd.infra.config import HttpTransport as HttpTransport
    from agentd.infra.config import LogLevel as LogLevel
    from agentd.infra.config import ProviderName as ProviderName
    from agentd.infra.config import ReasoningEffort as ReasoningEffort
    from agentd.infra.config import SandboxNetwork as SandboxNetwork
    from agentd.infra.config import SandboxSetting as SandboxSetting
    from agentd.infra.config import Settings as Settings
    from agentd.infra.config import TokenField as TokenField
    from agentd.infra.config import redact_url as redact_url
    from agentd.infra.logs import configure_logging as configure_logging
    from agentd.infra.logs import redact_tokens_in_server_logs as redact_tokens_in_server_logs
    from agentd.infra.metrics import Metrics as Metrics
    from agentd.infra.overload import LimitKind as LimitKind
    from agentd.infra.overload import RetryReason as RetryReason
    from agentd.infra.overload import overload_error as overload_error
    from agentd.infra.overload import retry_later as retry_later
    from agentd.infra.rss_trim import limit_arenas as limit_arenas
    from agentd.infra.rss_trim import run_trimmer as run_trimmer
    from agentd.infra.settings_check import explain as explain
    from agentd.infra.settings_check import explain_unparsable as explain_unparsable
    from agentd.infra.settings_check import unknown_variables as unknown_variables

# The public names, each loaded from its module on first use (PEP 562): importing the package
# costs nothing, so a started server loads only what it runs.
_WHERE = {
    "AuthError": "agentd.infra.auth",
    "AuthMode": "agentd.infra.config",
    "AuthUnavailable": "agentd.infra.auth",
    "Authenticator": "agentd.infra.auth",
    "CHALLENGE": "agentd.infra.auth",
    "CONFIG_ENV": "agentd.infra.config",
    "HttpTransport": "agentd.infra.config",
    "Identity": "agentd.infra.auth",
    "LOCAL_PRINCIPAL": "agentd.infra.auth",
    "LimitKind": "agentd.infra.overload",
    "LogLevel": "agentd.infra.config",
    "Metrics": "agentd.infra.metrics",
    "ProviderName": "agentd.infra.config",
    "ReasoningEffort": "agentd.infra.config",
    "RetryReason": "agentd.infra.overload",
    "SandboxNetwork": "agentd.infra.config",
    "SandboxSetting": "agentd.infra.config",
    "Settings": "agentd.infra.config",
    "TokenField": "agentd.infra.config",
    "chosen_subprotocol": "agentd.infra.auth",
    "configure_logging": "agentd.infra.logs",
    "create_token": "agentd.infra.auth",
    "explain": "agentd.infra.settings_check",
    "explain_unparsable": "agentd.infra.settings_check",
    "insecure_bind": "agentd.infra.auth",
    "limit_arenas": "agentd.infra.rss_trim",
    "overload_error": "agentd.infra.overload",
    "parse_duration": "agentd.infra.auth",
    "redact_tokens_in_server_logs": "agentd.infra.logs",
    "redact_url": "agentd.infra.config",
    "retry_later": "agentd.infra.overload",
    "run_trimmer": "agentd.infra.rss_trim",
    "team_names": "agentd.infra.auth",
    "unknown_variables": "agentd.infra.settings_check",
}


def __getattr__(name: str) -> object:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "CHALLENGE",
    "CONFIG_ENV",
    "LOCAL_PRINCIPAL",
    "AuthError",
    "AuthMode",
    "AuthUnavailable",
    "Authenticator",
    "HttpTransport",
    "Identity",
    "LimitKind",
    "LogLevel",
    "Metrics",
    "ProviderName",
    "ReasoningEffort",
    "RetryReason",
    "SandboxNetwork",
    "SandboxSetting",
    "Settings",
    "TokenField",
    "chosen_subprotocol",
    "configure_logging",
    "create_token",
    "explain",
    "explain_unparsable",
    "insecure_bind",
    "limit_arenas",
    "overload_error",
    "parse_duration",
    "redact_tokens_in_server_logs",
    "redact_url",
    "retry_later",
    "run_trimmer",
    "team_names",
    "unknown_variables",
]

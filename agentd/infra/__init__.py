"""Shared infrastructure the layers above use: settings (`config`), authentication (`auth`),
logging (`logs`), Prometheus metrics (`metrics`), overload refusals (`overload`), the OS
memory trimmer (`rss_trim`), where new objects' memory comes from (`small_alloc`) and what
the event loop lets go when idle (`idle_release`). Nothing here knows about sessions or
the agent loop."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentd._faces import lazy_face

if TYPE_CHECKING:
    from agentd.infra.auth import CHALLENGE as CHALLENGE
    from agentd.infra.auth import Authenticator as Authenticator
    from agentd.infra.auth import AuthError as AuthError
    from agentd.infra.auth import AuthUnavailable as AuthUnavailable
    from agentd.infra.auth import Identity as Identity
    from agentd.infra.auth import chosen_subprotocol as chosen_subprotocol
    from agentd.infra.auth import create_token as create_token
    from agentd.infra.auth import insecure_bind as insecure_bind
    from agentd.infra.auth import parse_duration as parse_duration
    from agentd.infra.auth import team_names as team_names
    from agentd.infra.config import Settings as Settings
    from agentd.infra.config import redact_url as redact_url
    from agentd.infra.idle_release import DefaultExecutor as DefaultExecutor
    from agentd.infra.logs import configure_logging as configure_logging
    from agentd.infra.logs import redact_tokens_in_server_logs as redact_tokens_in_server_logs
    from agentd.infra.metrics import Metrics as Metrics
    from agentd.infra.overload import LimitKind as LimitKind
    from agentd.infra.overload import RetryReason as RetryReason
    from agentd.infra.overload import overload_error as overload_error
    from agentd.infra.overload import retry_later as retry_later
    from agentd.infra.rss_trim import limit_arenas as limit_arenas
    from agentd.infra.rss_trim import run_trimmer as run_trimmer
    from agentd.infra.rss_trim import trim as trim
    from agentd.infra.setting_choices import CONFIG_ENV as CONFIG_ENV
    from agentd.infra.setting_choices import DEFAULT_HOST as DEFAULT_HOST
    from agentd.infra.setting_choices import DEFAULT_MODEL as DEFAULT_MODEL
    from agentd.infra.setting_choices import DEFAULT_PORT as DEFAULT_PORT
    from agentd.infra.setting_choices import LOCAL_PRINCIPAL as LOCAL_PRINCIPAL
    from agentd.infra.setting_choices import AuthMode as AuthMode
    from agentd.infra.setting_choices import HttpTransport as HttpTransport
    from agentd.infra.setting_choices import LogFormat as LogFormat
    from agentd.infra.setting_choices import LogLevel as LogLevel
    from agentd.infra.setting_choices import ProviderName as ProviderName
    from agentd.infra.setting_choices import ReasoningEffort as ReasoningEffort
    from agentd.infra.setting_choices import SandboxNetwork as SandboxNetwork
    from agentd.infra.setting_choices import SandboxSetting as SandboxSetting
    from agentd.infra.setting_choices import TokenField as TokenField
    from agentd.infra.settings_check import explain as explain
    from agentd.infra.settings_check import explain_unparsable as explain_unparsable
    from agentd.infra.settings_check import unknown_variables as unknown_variables
    from agentd.infra.small_alloc import allocator_in_use as allocator_in_use
    from agentd.infra.small_alloc import switch_to_malloc as switch_to_malloc

# The public names, each loaded from its module on first use (PEP 562): importing the package
# costs nothing, so a started server loads only what it runs.
_WHERE = {
    "Authenticator": "agentd.infra.auth",
    "AuthError": "agentd.infra.auth",
    "AuthMode": "agentd.infra.setting_choices",
    "AuthUnavailable": "agentd.infra.auth",
    "allocator_in_use": "agentd.infra.small_alloc",
    "CHALLENGE": "agentd.infra.auth",
    "chosen_subprotocol": "agentd.infra.auth",
    "CONFIG_ENV": "agentd.infra.setting_choices",
    "configure_logging": "agentd.infra.logs",
    "create_token": "agentd.infra.auth",
    "DEFAULT_HOST": "agentd.infra.setting_choices",
    "DEFAULT_MODEL": "agentd.infra.setting_choices",
    "DEFAULT_PORT": "agentd.infra.setting_choices",
    "DefaultExecutor": "agentd.infra.idle_release",
    "explain": "agentd.infra.settings_check",
    "explain_unparsable": "agentd.infra.settings_check",
    "HttpTransport": "agentd.infra.setting_choices",
    "Identity": "agentd.infra.auth",
    "insecure_bind": "agentd.infra.auth",
    "limit_arenas": "agentd.infra.rss_trim",
    "LimitKind": "agentd.infra.overload",
    "LOCAL_PRINCIPAL": "agentd.infra.setting_choices",
    "LogFormat": "agentd.infra.setting_choices",
    "LogLevel": "agentd.infra.setting_choices",
    "Metrics": "agentd.infra.metrics",
    "overload_error": "agentd.infra.overload",
    "parse_duration": "agentd.infra.auth",
    "ProviderName": "agentd.infra.setting_choices",
    "ReasoningEffort": "agentd.infra.setting_choices",
    "redact_tokens_in_server_logs": "agentd.infra.logs",
    "redact_url": "agentd.infra.config",
    "retry_later": "agentd.infra.overload",
    "RetryReason": "agentd.infra.overload",
    "run_trimmer": "agentd.infra.rss_trim",
    "trim": "agentd.infra.rss_trim",
    "SandboxNetwork": "agentd.infra.setting_choices",
    "SandboxSetting": "agentd.infra.setting_choices",
    "switch_to_malloc": "agentd.infra.small_alloc",
    "Settings": "agentd.infra.config",
    "team_names": "agentd.infra.auth",
    "TokenField": "agentd.infra.setting_choices",
    "unknown_variables": "agentd.infra.settings_check",
}


__all__ = [
    "CHALLENGE",
    "CONFIG_ENV",
    "DEFAULT_HOST",
    "DEFAULT_MODEL",
    "DEFAULT_PORT",
    "LOCAL_PRINCIPAL",
    "AuthError",
    "AuthMode",
    "AuthUnavailable",
    "Authenticator",
    "DefaultExecutor",
    "HttpTransport",
    "Identity",
    "LimitKind",
    "LogFormat",
    "LogLevel",
    "Metrics",
    "ProviderName",
    "ReasoningEffort",
    "RetryReason",
    "SandboxNetwork",
    "SandboxSetting",
    "Settings",
    "TokenField",
    "allocator_in_use",
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
    "switch_to_malloc",
    "team_names",
    "trim",
    "unknown_variables",
]

__getattr__, __dir__ = lazy_face(globals(), _WHERE)

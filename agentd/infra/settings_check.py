"""Mistakes in the settings, said in one line each (issue 31): an `AGENTD_*` variable that is
no setting (a typo must not quietly leave a default in force), a value a setting does not
take, a database URL in a spelling other tools use. Pure functions over the environment and
pydantic's errors; the CLI prints what they return."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from pydantic import ValidationError

PREFIX = "AGENTD_"
# Variables agentd reads that are not settings: the config file, a client's token, the
# tag on a tool's processes, the strict switch itself, the CLI's all-through-Typer switch.
NOT_SETTINGS = frozenset(
    {"AGENTD_CONFIG", "AGENTD_TOKEN", "AGENTD_TOOL_PROC", "AGENTD_STRICT", "AGENTD_CLI_TYPER"}
)
# Other tools' spellings of a Postgres or SQLite URL, and the async driver agentd runs them on.
URL_SCHEMES = {
    "postgres://": "postgresql+asyncpg://",
    "postgresql://": "postgresql+asyncpg://",
    "postgresql+psycopg://": "postgresql+asyncpg://",
    "postgresql+psycopg2://": "postgresql+asyncpg://",
    "sqlite://": "sqlite+aiosqlite://",
}


def env_name(field: str) -> str:
    return f"{PREFIX}{field.upper()}"


@dataclass(frozen=True)
class UnknownSetting:
    name: str  # as written: AGENTD_PERMISION_MODE, or a TOML key
    suggestion: str | None  # the setting it is closest to

    def line(self) -> str:
        hint = f" (did you mean {self.suggestion}?)" if self.suggestion else ""
        return f"{self.name} is not a setting{hint}; it is ignored"


def unknown_variables(environ: Mapping[str, str], fields: Iterable[str]) -> list[UnknownSetting]:
    """`AGENTD_*` variables that name no setting, each with the closest setting's name."""
    known = {env_name(f) for f in fields}
    out = []
    for name in sorted(environ):
        if name.startswith(PREFIX) and name not in known and name not in NOT_SETTINGS:
            import difflib  # only for a name that is wrong: not in every idle server (issue 32 item 3)

            close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.75)
            out.append(UnknownSetting(name, close[0] if close else None))
    return out


def unknown_keys(keys: Iterable[str], fields: Iterable[str]) -> list[UnknownSetting]:
    """Keys of the TOML file that name no setting."""
    import difflib  # as above

    known = sorted(fields)
    return [
        UnknownSetting(k, next(iter(difflib.get_close_matches(k, known, n=1, cutoff=0.75)), None))
        for k in sorted(set(keys) - set(known))
    ]


def async_database_url(url: str) -> str:
    """A database URL on the driver agentd runs: `postgres://…` and `postgresql://…` (what
    Heroku, psql and most hosting panels hand out) become `postgresql+asyncpg://…`."""
    for scheme, driver in URL_SCHEMES.items():
        if url.startswith(scheme):
            return driver + url[len(scheme) :]
    return url


def _allowed(error: Mapping[str, Any]) -> str:
    ctx = error.get("ctx") or {}
    if "expected" in ctx:  # enums and literals: pydantic lists them
        return f"expected {ctx['expected']}"
    return str(error.get("msg", "invalid")).removeprefix("Value error, ")


def _shown(value: Any) -> str:
    if isinstance(value, Enum):
        value = value.value
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def explain(exc: ValidationError, secret_fields: Iterable[str] = ()) -> str:
    """One line per bad setting, naming its variable, the value given and what it takes
    (never the value of a secret)."""
    secrets = set(secret_fields)
    lines = []
    for error in exc.errors():
        loc = [str(p) for p in error.get("loc", ())]
        field = loc[0] if loc else "?"
        where = env_name(field) + "".join(f"[{p}]" for p in loc[1:])
        value = "***" if field in secrets else _shown(error.get("input"))
        lines.append(f"{where}={value}: {_allowed(error)}")
    return "; ".join(lines)


_PARSE_ERROR = re.compile(r'error parsing value for field "(\w+)"')


def explain_unparsable(
    exc: Exception, environ: Mapping[str, str], secret_fields: Iterable[str] = ()
) -> str | None:
    """One line for a list or table setting whose variable is not JSON (pydantic-settings'
    `SettingsError`), or None for another error."""
    found = _PARSE_ERROR.search(str(exc))
    if found is None:
        return None
    field = found.group(1)
    name = env_name(field)
    value = "***" if field in set(secret_fields) else _shown(environ.get(name, ""))
    return f'{name}={value}: expected JSON (a list like ["a", "b"] or a table like {{"k": 1}})'

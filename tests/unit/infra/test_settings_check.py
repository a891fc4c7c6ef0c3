"""Settings catch mistakes (issue 31, item 2), without a server: a table over every setting —
each one given a value it does not take is refused in one line naming its `AGENTD_*`
variable, the value and what it takes (a secret's value never shown); typos get the closest
setting; other tools' database URLs run on the async driver."""

from __future__ import annotations

import pytest
from pydantic import SecretStr, ValidationError
from pydantic_settings import SettingsError

from agentd.infra.config import Settings
from agentd.infra.settings_check import (
    async_database_url,
    env_name,
    explain,
    explain_unparsable,
    unknown_keys,
    unknown_variables,
)

# Values no setting of a stricter type takes: one of them trips every non-string setting.
BAD_VALUES = ["not-a-number", "{broken json", "maybe-not-a-bool", "-99999999999999999999999"]
SECRETS = [name for name, f in Settings.model_fields.items() if "Secret" in str(f.annotation)]


def refusal(monkeypatch: pytest.MonkeyPatch, field: str) -> tuple[str, str] | None:
    """(the bad value, the one-line explanation) for `field`, or None if it takes any text."""
    for value in BAD_VALUES:
        monkeypatch.setenv(env_name(field), value)
        try:
            Settings()
        except ValidationError as exc:
            return value, explain(exc, SECRETS)
        except SettingsError as exc:  # a list or table setting whose value is not JSON
            line = explain_unparsable(exc, {env_name(field): value}, SECRETS)
            assert line is not None, exc
            return value, line
        finally:
            monkeypatch.delenv(env_name(field))
    return None


@pytest.mark.parametrize("field", sorted(Settings.model_fields))
def test_every_setting_refuses_a_bad_value_in_one_line(monkeypatch: pytest.MonkeyPatch, field: str) -> None:
    found = refusal(monkeypatch, field)
    annotation = str(Settings.model_fields[field].annotation)
    if found is None:  # free text (names, URLs, paths, keys): nothing to refuse
        assert any(t in annotation for t in ("str", "Path", "Secret")), (field, annotation)
        return
    value, line = found
    assert "\n" not in line and line.startswith(env_name(field)), line
    assert "errors.pydantic.dev" not in line and "validation error" not in line, line
    if field in SECRETS:
        assert value not in line and "***" in line, line
    else:
        assert value[:50] in line, line


def test_an_enum_says_what_it_takes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTD_PERMISSION_MODE", "yolo")
    with pytest.raises(ValidationError) as caught:
        Settings()
    line = explain(caught.value)
    assert line.startswith("AGENTD_PERMISSION_MODE=yolo: expected ")
    for mode in ("default", "accept_edits", "plan", "bypass"):
        assert mode in line


@pytest.mark.parametrize(
    ("name", "suggestion"),
    [
        ("AGENTD_PERMISION_MODE", "AGENTD_PERMISSION_MODE"),
        ("AGENTD_DATABSE_URL", "AGENTD_DATABASE_URL"),
        ("AGENTD_PROVDER", "AGENTD_PROVIDER"),
        ("AGENTD_SOMETHING_ELSE_ENTIRELY", None),
    ],
)
def test_a_variable_that_is_no_setting_is_named_with_the_closest(name: str, suggestion: str | None) -> None:
    environ = {name: "x", "AGENTD_PORT": "9000", "AGENTD_TOKEN": "t", "AGENTD_CONFIG": "c", "PATH": "/bin"}
    (found,) = unknown_variables(environ, Settings.model_fields)
    assert found.name == name and found.suggestion == suggestion
    assert name in found.line() and (suggestion is None or f"did you mean {suggestion}?" in found.line())


def test_a_toml_key_that_is_no_setting_is_named_with_the_closest() -> None:
    (found,) = unknown_keys(["port", "permision_mode"], Settings.model_fields)
    assert (found.name, found.suggestion) == ("permision_mode", "permission_mode")


@pytest.mark.parametrize(
    ("given", "runs_as"),
    [
        ("postgres://u:p@db:5432/agentd", "postgresql+asyncpg://u:p@db:5432/agentd"),
        ("postgresql://u@db/agentd", "postgresql+asyncpg://u@db/agentd"),
        ("postgresql+psycopg://u@db/agentd", "postgresql+asyncpg://u@db/agentd"),
        ("postgresql+asyncpg://u@db/agentd", "postgresql+asyncpg://u@db/agentd"),
        ("sqlite:////var/lib/agentd.db", "sqlite+aiosqlite:////var/lib/agentd.db"),
        ("sqlite+aiosqlite:///x.db", "sqlite+aiosqlite:///x.db"),
    ],
)
def test_other_tools_database_urls_run_on_the_async_driver(given: str, runs_as: str) -> None:
    assert async_database_url(given) == runs_as
    assert Settings(database_url=SecretStr(given)).resolved_database_url() == runs_as or (
        Settings(database_url=given).resolved_database_url() == runs_as  # type: ignore[arg-type]
    )

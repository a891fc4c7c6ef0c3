"""Secrets in the settings are `SecretStr` (R-X4): no printed, logged or dumped form of the
settings shows them, and the code that needs one still gets the real value."""

from __future__ import annotations

import json

import pytest

from agentd.infra.config import FallbackLane, ProviderName, Settings

SECRETS = {
    "openai_api_key": "sk-openai-s3cret",
    "anthropic_api_key": "sk-ant-s3cret",
    "database_url": "postgresql+asyncpg://agentd:db-s3cret@db:5432/agentd",
}
LANE_KEY = "sk-lane-s3cret"


@pytest.fixture
def settings(monkeypatch: pytest.MonkeyPatch) -> Settings:
    for name in SECRETS:
        monkeypatch.delenv(f"AGENTD_{name.upper()}", raising=False)
    monkeypatch.setenv(
        "AGENTD_FALLBACKS", json.dumps([{"provider": "anthropic", "model": "m", "api_key": LANE_KEY}])
    )
    return Settings(**SECRETS)  # type: ignore[arg-type]  # str → SecretStr by validation


def _forms(settings: Settings) -> dict[str, str]:
    return {
        "repr": repr(settings),
        "str": str(settings),
        "model_dump_json": settings.model_dump_json(),
        "model_dump": str(settings.model_dump()),
        "lane repr": repr(settings.fallbacks),
    }


@pytest.mark.parametrize("secret", [*SECRETS.values(), LANE_KEY, "db-s3cret"])
def test_no_form_of_the_settings_shows_a_secret(settings: Settings, secret: str) -> None:
    for form, text in _forms(settings).items():
        assert secret not in text, f"{secret!r} appears in the settings' {form}"


def test_the_secret_values_are_still_there_for_their_users(settings: Settings) -> None:
    assert settings.openai_api_key is not None and settings.anthropic_api_key is not None
    assert settings.openai_api_key.get_secret_value() == SECRETS["openai_api_key"]
    assert settings.anthropic_api_key.get_secret_value() == SECRETS["anthropic_api_key"]
    assert settings.resolved_database_url() == SECRETS["database_url"]
    lane = settings.fallbacks[0]
    assert lane == FallbackLane(provider=ProviderName.ANTHROPIC, model="m", api_key=LANE_KEY)  # type: ignore[arg-type]
    assert lane.api_key is not None and lane.api_key.get_secret_value() == LANE_KEY


def test_an_unset_database_url_defaults_to_sqlite_in_home(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTD_DATABASE_URL", raising=False)
    settings = Settings(home="/srv/agentd")  # type: ignore[arg-type]
    assert settings.resolved_database_url() == "sqlite+aiosqlite:////srv/agentd/agentd.db"

"""Settings catch mistakes on the real CLI (issue 31, item 2): a misspelt `AGENTD_*`
variable is named with the setting it is closest to — a warning, or a refusal with
`--strict`; a bad value is one line naming the variable, the value and what it takes; a
`postgres://` URL runs on the async driver; a home folder that cannot be used says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import agentd, clean_env


async def test_a_misspelt_variable_is_named_and_refused_with_strict(tmp_path: Path) -> None:
    env = clean_env(tmp_path, AGENTD_HOME=str(tmp_path / "home"), AGENTD_PERMISION_MODE="bypass")
    # `agentd token list` reads the settings and exits: the warning, then its own work.
    warned = await agentd("token", "list", env=env, cwd=tmp_path)
    assert warned.code == 0, warned.text
    assert (
        "agentd: warning: AGENTD_PERMISION_MODE is not a setting (did you mean AGENTD_PERMISSION_MODE?); "
        "it is ignored" in warned.err.splitlines()
    ), warned.err
    strict = await agentd("--strict", "token", "list", env=env, cwd=tmp_path)
    assert strict.code == 2, strict.text
    assert strict.err.strip().splitlines() == [
        "agentd: error: AGENTD_PERMISION_MODE is not a setting (did you mean AGENTD_PERMISSION_MODE?); "
        "it is ignored"
    ]


@pytest.mark.parametrize(
    ("variable", "value", "fragment"),
    [
        ("AGENTD_PERMISSION_MODE", "yolo", "expected 'default', 'accept_edits', 'bypass' or 'plan'"),
        ("AGENTD_PORT", "eighty", "valid integer"),
        ("AGENTD_ALLOWED_HOSTS", "{nope", "expected JSON"),
    ],
)
async def test_a_bad_value_is_one_line_naming_the_setting(
    tmp_path: Path, variable: str, value: str, fragment: str
) -> None:
    env = clean_env(tmp_path, AGENTD_HOME=str(tmp_path / "home"), **{variable: value})
    run = await agentd("serve", env=env, cwd=tmp_path)
    assert run.code == 2, run.text
    (line,) = run.err.strip().splitlines()
    assert line.startswith(f"agentd: error: invalid setting: {variable}={value}: "), line
    assert fragment in line, line
    assert "pydantic" not in line and "Traceback" not in run.text


async def test_a_postgres_url_in_the_usual_spelling_migrates(tmp_path: Path, pg_url: str) -> None:
    plain = pg_url.replace("postgresql+asyncpg://", "postgres://", 1)
    run = await agentd("migrate", "--database-url", plain, env=clean_env(tmp_path), cwd=tmp_path)
    assert run.code == 0, run.text
    assert "database at revision" in run.out


async def test_a_home_folder_that_cannot_be_made_names_the_folder(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    home = blocker / "home"
    run = await agentd("serve", "--port", "0", env=clean_env(tmp_path, AGENTD_HOME=str(home)), cwd=tmp_path)
    assert run.code == 2, run.text
    (line,) = run.err.strip().splitlines()
    assert line.startswith(f"agentd: error: AGENTD_HOME={home}: cannot create the folder"), line

"""R-O: settings from an optional TOML file (`agentd --config FILE` / `AGENTD_CONFIG`),
under the environment and the command-line flags. A key that is not a setting, a
missing file or bad TOML is a clear error, never a silently ignored default."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from agentd.infra.config import PermissionMode, Settings
from tests.support.client import WsClient, agent_text, text_prompt
from tests.support.proc import agentd_process, free_port, wait_healthy


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for key in list(os.environ):
        if key.startswith("AGENTD_"):
            monkeypatch.delenv(key)
    return monkeypatch


def test_the_file_sits_under_environment_and_flags(tmp_path: Path, clean_env: pytest.MonkeyPatch) -> None:
    config = tmp_path / "agentd.toml"
    config.write_text(
        'port = 9001\npermission_mode = "plan"\nallowed_origins = ["https://app.example.com"]\n'
        '[prices."gpt-4o"]\ninput = 2.5\noutput = 10\n'
    )
    clean_env.setenv("AGENTD_CONFIG", str(config))
    s = Settings()
    assert (s.port, s.permission_mode, s.allowed_origins) == (
        9001,
        PermissionMode.PLAN,
        ["https://app.example.com"],
    )
    assert (s.prices["gpt-4o"].input, s.prices["gpt-4o"].output) == (2.5, 10)
    clean_env.setenv("AGENTD_PORT", "9002")
    assert Settings().port == 9002  # the environment beats the file
    assert Settings(port=9003).port == 9003  # a flag beats both
    assert Settings().permission_mode is PermissionMode.PLAN  # the rest still from the file


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("prot = 9001\n", "prot is not a setting (did you mean port?); it is refused"),
        ("port = \n", "config file"),
        ('port = "not a number"\n', "port"),
    ],
)
def test_a_bad_file_is_a_clear_error(
    tmp_path: Path, clean_env: pytest.MonkeyPatch, content: str, message: str
) -> None:
    config = tmp_path / "agentd.toml"
    config.write_text(content)
    clean_env.setenv("AGENTD_CONFIG", str(config))
    with pytest.raises(ValueError) as err:
        Settings()
    assert message in str(err.value)


def test_a_missing_file_is_a_clear_error(tmp_path: Path, clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("AGENTD_CONFIG", str(tmp_path / "nope.toml"))
    with pytest.raises(ValueError, match="does not exist"):
        Settings()


async def test_agentd_serve_runs_from_a_config_file(tmp_path: Path, workspace: Path) -> None:
    port = free_port()
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": [{"text": "configured by TOML"}]}))
    db = tmp_path / "from-config.db"
    config = tmp_path / "agentd.toml"
    config.write_text(
        f'port = {port}\ndatabase_url = "sqlite+aiosqlite:///{db}"\nprovider = "scripted"\n'
        f'script = "{script}"\npermission_mode = "bypass"\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    env.update(AGENTD_HOME=str(tmp_path / "home"), HOME=str(tmp_path))
    log = tmp_path / "serve.log"
    async with agentd_process(
        ["--config", str(config), "serve", "--log-level", "warning"], env=env, log=log
    ) as proc:
        base = f"http://127.0.0.1:{port}"
        await wait_healthy(base, proc, log)
        client = await WsClient.connect(base)
        sid = await client.call("session/new", {"cwd": str(workspace), "mcpServers": []})
        assert sid["modes"]["currentModeId"] == "bypass"
        await client.call("session/prompt", text_prompt(sid["sessionId"], "hi"))
        assert agent_text(client.updates(sid["sessionId"])) == "configured by TOML"
        await client.close()
    assert db.exists()


async def test_agentd_refuses_to_start_on_a_bad_config_file(tmp_path: Path) -> None:
    config = tmp_path / "agentd.toml"
    config.write_text("bogus_setting = 1\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentd.cli", "--config", str(config), "serve", env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 2
    assert "bogus_setting is not a setting" in err.decode()

"""The turn machinery loads with the first session (issue 14, agentd/session/services.py), but
configured files and overrides are still read at start-up: a mistake in an agent definition,
the hooks file or AGENTD_LIMITS stops the server before it serves anything; a good one is in
force from the first session."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentd.agents import AgentDefinitionError
from agentd.app import create_app
from agentd.infra.config import Settings


def bad_agents(tmp_path: Path) -> dict[str, Any]:
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "broken.toml").write_text('name = "broken"\ntools = ["no_such_tool"]\n')
    return {"agents_dir": folder}


def bad_hooks(tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "hooks.toml"
    path.write_text("this is = = not toml\n")
    return {"hooks_file": path}


def bad_limits(tmp_path: Path) -> dict[str, Any]:
    return {"limits": {"retry": {"no_such_field": 1}}}


@pytest.mark.parametrize("mistake", [bad_agents, bad_hooks, bad_limits])
async def test_a_mistake_in_a_configured_file_stops_the_start_up(tmp_path: Path, mistake: Any) -> None:
    settings = Settings(home=tmp_path / "home", provider="scripted", **mistake(tmp_path))
    app = create_app(settings)
    with pytest.raises((AgentDefinitionError, ValueError)):
        async with app.router.lifespan_context(app):
            pass


async def test_a_configured_agent_is_known_from_the_first_session(tmp_path: Path) -> None:
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "reviewer.toml").write_text('name = "reviewer"\ndescription = "R"\ntools = ["read_file"]\n')
    app = create_app(Settings(home=tmp_path / "home", provider="scripted", agents_dir=folder))
    async with app.router.lifespan_context(app):
        state = app.state.agentd
        assert sorted(state.agents) == ["default", "reviewer"]
        actor = await state.manager.create(cwd=str(tmp_path), owner="local", agent="reviewer")
        assert actor.agent.name == "reviewer"
        assert list(actor.agent.select_tools(state.services.tools)) == ["read_file"]

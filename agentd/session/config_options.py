"""A session's ACP config options (R-P2): permission mode, plan gate, model and agent, as
`select` options an editor renders as pickers. Built from the session's state and the server's
configuration; shared by the method answers and the `config_option_update` event."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from agentd.core import PermissionMode

if TYPE_CHECKING:
    from agentd.session.services import ActorServices

MODES: list[dict[str, str]] = [
    {"id": PermissionMode.DEFAULT.value, "name": "Default", "description": "Ask before edits and commands"},
    {
        "id": PermissionMode.ACCEPT_EDITS.value,
        "name": "Accept edits",
        "description": "Edit freely, ask for commands",
    },
    {"id": PermissionMode.BYPASS.value, "name": "Bypass", "description": "Approve everything"},
    {
        "id": PermissionMode.PLAN.value,
        "name": "Plan",
        "description": "Read-only whatever the permission mode (clear with /plan off)",
    },
]

PLAN_OFF, PLAN_ON = "off", "on"  # the `plan` option's values: the only way besides `/plan off` to clear it


def model_choices(
    default: str, lanes: Iterable[str], agent_models: Iterable[str | None], current: str
) -> list[str]:
    """The models a session may switch to: the server's model, the provider chain's, the
    agent definitions' — and the current one (e.g. set with `/model`), without repeats."""
    seen: dict[str, None] = {}
    for m in (default, *lanes, *(m for m in agent_models if m), current):
        seen.setdefault(m, None)
    return list(seen)


def config_options(
    *, mode: str, model: str, agent: str, agents: Mapping[str, str], models: list[str], plan: bool = False
) -> list[dict[str, Any]]:
    """`agents`: name → description."""
    return [
        {
            "id": "mode",
            "name": "Permission mode",
            "category": "mode",
            "type": "select",
            "currentValue": mode,
            "options": [{"value": m["id"], "name": m["name"]} for m in MODES],
        },
        {
            # The plan gate on its own: picking another mode above never clears it.
            "id": "plan",
            "name": "Plan (read-only)",
            "description": "No edits and no commands, whatever the permission mode",
            "type": "select",
            "currentValue": PLAN_ON if plan else PLAN_OFF,
            "options": [{"value": PLAN_OFF, "name": "Off"}, {"value": PLAN_ON, "name": "On"}],
        },
        {
            "id": "model",
            "name": "Model",
            "category": "model",
            "type": "select",
            "currentValue": model,
            "options": [{"value": m, "name": m} for m in models],
        },
        {
            "id": "agent",
            "name": "Agent",
            "type": "select",
            "currentValue": agent,
            "options": [{"value": name, "name": text or name} for name, text in agents.items()],
        },
    ]


def session_config_options(
    services: ActorServices, mode: str, model: str, agent: str, *, plan: bool = False
) -> list[dict[str, Any]]:
    """A session's options: its state, with the choices the server's configuration offers."""
    models = model_choices(
        services.settings.model,
        (lane.model for lane in services.fallbacks),
        (a.model for a in services.agents.values()),
        model,
    )
    agents = {name: a.description for name, a in services.agents.items()}
    return config_options(mode=mode, model=model, agent=agent, agents=agents, models=models, plan=plan)

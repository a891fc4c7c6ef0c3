"""The provider's model catalogue over the protocol (issue 33, item 3): `_agentd/models/list`,
and the short wait for a stale list before a session's config options are answered."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from agentd.protocol import ModelsListParams
from agentd.session import model_choices
from agentd.transport.state import CallContext

# A session/new waits this long at most for a stale list (once per TTL; a provider that
# does not answer delays no more than this, and its list is there for the next session).
MODELS_WAIT_S = 3.0


async def catalogue_fresh(ctx: CallContext) -> None:
    catalogue = ctx.state.services.models
    if catalogue is not None:
        await catalogue.fresh(MODELS_WAIT_S)


async def models_list(ctx: CallContext, params: ModelsListParams) -> dict[str, Any]:
    """The models a session may pick: the configured ones, then what the provider serves
    and the operator allows; `refresh: true` asks the provider first."""
    services = ctx.state.services
    catalogue = services.models
    if catalogue is not None:
        await (catalogue.refresh() if params.refresh else catalogue.fresh(MODELS_WAIT_S))
    served = {m.id: m for m in catalogue.models()} if catalogue is not None else {}
    default = services.settings.model
    lanes = (lane.model for lane in services.fallbacks)
    configured = model_choices(default, lanes, (a.model for a in services.agents.values()), default)
    models = [
        {
            "id": model,
            "name": (served[model].name if model in served else None) or model,
            "source": "configured" if model in configured else "provider",
            "contextWindow": services.context_window_for(model),
        }
        for model in dict.fromkeys([*configured, *served])
    ]
    fetched = catalogue.fetched_wall if catalogue is not None else None
    return {
        "models": models,
        "listing": bool(catalogue is not None and catalogue.enabled),
        "fetchedAt": datetime.fromtimestamp(fetched, UTC).isoformat() if fetched is not None else None,
        "error": catalogue.error if catalogue is not None else None,
    }

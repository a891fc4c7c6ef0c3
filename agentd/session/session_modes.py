"""A session's modes changing (R-T4, issue 16 item 8): the permission mode and the plan
gate are two switches (`SessionModes`); a change is persisted with the session (so the gate
survives a restart) and announced — `plan_mode` when the gate moves, `mode_changed` (ACP
`current_mode_update`) with the id clients are shown."""

from __future__ import annotations

from agentd.core import ModeChanged, PlanModeChanged, SessionModes
from agentd.session.eventlog import Journal


def record_modes_change(journal: Journal, old: SessionModes, new: SessionModes) -> bool:
    """Persist and announce `old` → `new`; False (and nothing written) when nothing changed."""
    if new == old:
        return False
    journal.persist_fields({"mode": new.permission.value, "plan": new.plan})
    if new.plan != old.plan:
        journal.emit(PlanModeChanged(new.plan))
    # Also when the shown id stays `plan` (bypass chosen under the gate): the client that
    # picked another mode learns the session still shows `plan`.
    journal.emit(ModeChanged(new.mode_id.value, new.permission.value, new.plan))
    return True

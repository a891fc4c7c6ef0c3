"""`AGENTD_DETACHED_EVICT_S` (issue 32 item 3): the short grace of an idle session that
keeps no processes; validated like the long one."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from agentd.infra.config import Settings


def test_the_default_grace_is_short_and_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert Settings(home=tmp_path).detached_evict_s == 30.0
    assert Settings(home=tmp_path).idle_evict_s == 600.0
    monkeypatch.setenv("AGENTD_DETACHED_EVICT_S", "5")
    assert Settings(home=tmp_path).detached_evict_s == 5.0


@pytest.mark.parametrize("field", ["detached_evict_s", "idle_evict_s"])
def test_a_negative_grace_is_refused(field: str, tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match=field):
        Settings(home=tmp_path, **{field: -1})

"""The documents users read speak to users (issue 31, item 8): README.md and docs/protocol.md
cite no internal requirement ids (`R-C1`, `R-X3`…) — those belong to the developers' map."""

from __future__ import annotations

import re

import pytest

from tests.support.paths import REPO_ROOT


@pytest.mark.parametrize("name", ["README.md", "docs/protocol.md", "docs/scripted-provider.md"])
def test_user_documents_cite_no_requirement_ids(name: str) -> None:
    text = (REPO_ROOT / name).read_text(encoding="utf-8")
    cited = sorted(set(re.findall(r"\bR-[A-Z]+[0-9]+[a-z]?\b", text)))
    assert not cited, f"{name} cites internal requirement ids: {cited}"

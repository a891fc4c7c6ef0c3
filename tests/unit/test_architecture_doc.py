"""docs/architecture.md is a map that cannot drift (issue 27 item 7): its layer picture is the
one drawn from the import contracts CI enforces, every path it names exists, and it fits on
two screens."""

from __future__ import annotations

import re

from tests.support.architecture import DOC, ROOT, drawn, layer_picture

PATH = re.compile(r"`((?:agentd|tests|docs|bench)/[^`\s<>]*|pyproject\.toml)`")  # <area>: a pattern


def test_the_picture_is_the_one_the_contracts_draw() -> None:
    picture = drawn(DOC.read_text())
    assert picture, "the layer picture's markers are missing"
    assert picture == layer_picture(), "redraw it: python -m tests.support.architecture --write"


def test_every_named_path_exists() -> None:
    named = PATH.findall(DOC.read_text())
    assert len(named) > 30  # the concept table and the path of a prompt name real files
    missing = sorted({p for p in named if not (ROOT / p.rstrip("/")).exists()})
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


def test_the_map_fits_on_two_screens() -> None:
    assert len(DOC.read_text().splitlines()) <= 120

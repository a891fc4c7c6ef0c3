"""Toad (PyPI `batrachian-toad`), a terminal ACP client, against `agentd acp` (issue 29 item 4).

Every release of batrachian-toad requires Python >= 3.14 (0.5.0 to 0.6.20 all declare
`Requires-Python >=3.14`; pip finds no version for older interpreters), and it is a Textual
TUI, not a scriptable client. Where no Python 3.14 is on PATH the test is skipped with that
reason; where one is, driving Toad's TUI headlessly is not written yet, and it says so."""

from __future__ import annotations

import shutil

import pytest

SUPPORTED = ("python3.15", "python3.14")


def test_toad_drives_agentd_acp() -> None:
    python = next((p for p in map(shutil.which, SUPPORTED) if p is not None), None)
    if python is None:
        pytest.skip("Toad (batrachian-toad) needs Python >= 3.14; no python3.14+ on PATH here")
    pytest.skip(f"{python} could run Toad, but a headless drive of its TUI is not written yet")

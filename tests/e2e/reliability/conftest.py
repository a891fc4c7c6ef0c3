"""The reliability suite (see README.md): real servers, bounded in CI, knobs for longer runs."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "reliability: kill -9 loop, frame fuzzer, cross-principal matrix (-m 'not reliability' skips them)",
    )

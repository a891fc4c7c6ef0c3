"""Under pytest-xdist a worker's terminal output goes nowhere, so the per-test timeout's
stack dump (pytest-timeout's thread method writes it to the terminal, then ends the
worker) would be lost. In a worker, the terminal writer the timeout uses writes to the
inherited stderr instead: a hung test still ends the run's wait and leaves its stacks."""

from __future__ import annotations

import os

import pytest
from _pytest._io import TerminalWriter


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):  # an xdist worker, not the controller
        writer = TerminalWriter(os.fdopen(os.dup(2), "w"))
        config.get_terminal_writer = lambda: writer  # type: ignore[method-assign]

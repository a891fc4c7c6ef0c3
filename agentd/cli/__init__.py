"""The `agentd` command: serve, migrate, token, chat, demo, doctor, acp.

Each sub-command module declares its options only; what a command runs is imported when
it runs, so `agentd --help` (and a command's `--help`) loads Typer and the settings' enums,
not the settings model, the store, the app or the loop (issue 32). `agentd serve` with
only its own options does not load Typer at all (agentd/cli/serving.py: a server keeps
what it imported; issue 32 item 3). The Typer `app` (with every command registered) is
made when first asked for: `from agentd.cli import app`."""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["app", "main"]
# AGENTD_CLI_TYPER=1: every command line through Typer (the library path of `agentd serve`).
TYPER_ENV = "AGENTD_CLI_TYPER"


def _typer_app() -> Any:
    # Importing the modules registers their commands on `app`, in this order in the help.
    # isort: off
    from agentd.cli import server as _server
    from agentd.cli import tokens as _tokens
    from agentd.cli import clients as _clients
    from agentd.cli import acp as _acp
    from agentd.cli import session as _session

    # isort: on
    from agentd.cli.common import app

    del _server, _tokens, _clients, _acp, _session
    return app


def __getattr__(name: str) -> Any:
    if name == "app":
        return _typer_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    typer_only = os.environ.get(TYPER_ENV, "").strip().lower() in ("1", "true", "yes", "on")
    if sys.argv[1:2] == ["serve"] and not typer_only:
        from agentd.cli.serving import serve_args

        if (given := serve_args(sys.argv[1:])) is not None:
            from agentd.cli.serving import serve_now

            serve_now(**given)
            return
    _typer_app()()

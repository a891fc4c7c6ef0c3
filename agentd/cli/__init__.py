"""The `agentd` command: serve, migrate, token, chat, demo, doctor, acp.

Each sub-command module declares its options only; what a command runs is imported when
it runs, so `agentd --help` (and a command's `--help`) loads Typer and the settings' enums,
not the settings model, the store, the app or the loop (issue 32)."""

from __future__ import annotations

# Importing the modules registers their commands on `app`, in this order in the help.
# isort: off
from agentd.cli import server as _server
from agentd.cli import tokens as _tokens
from agentd.cli import clients as _clients
from agentd.cli import acp as _acp
from agentd.cli import session as _session

# isort: on
from agentd.cli.common import app

__all__ = ["app", "main"]
_COMMANDS = (_server, _tokens, _clients, _acp, _session)


def main() -> None:
    app()

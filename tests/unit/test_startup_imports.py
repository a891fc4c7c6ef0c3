"""Start-up (issue 14): the server app imports nothing a request may never need — the
`mcp` SDK loads when a session names an MCP server, Alembic when the schema is behind,
structlog (with rich and pygments) only for JSON logs, jsonschema at the first tool call or
structured output, pathspec and `regex` at the first file walk or grep, `pydantic.v1` never
(FastAPI imports it for typed route parameters: the routes take the request), `watchfiles`
never (uvicorn's `--reload` supervisor; agentd does not reload) (idle memory).
Checked in a fresh interpreter, whose `sys.modules` this test process cannot pollute."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.paths import REPO_ROOT

LAZY = (
    "mcp", "alembic", "structlog", "rich", "pygments", "jsonschema", "pathspec", "regex", "pydantic.v1",
    "watchfiles",
)  # fmt: skip


def test_importing_the_server_loads_none_of_the_lazy_packages() -> None:
    code = (
        "import json, sys\n"
        "import server.app, server.cli, server.serve\n"
        "server.app.create_app()\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m in {LAZY!r} or m.split('.')[0] in {LAZY!r})))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(out.stdout) == []

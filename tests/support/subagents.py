"""Agent definitions for the sub-agent tests (the task tool) and a task call to start one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.session import tool_call

EXPLORER = """\
name = "explorer"
description = "Finds things in the workspace"
model = "small-model"
tools = ["read_file"]
max_turns = 3
system_prompt = "You are the EXPLORER."
"""
NESTER = """\
name = "nester"
description = "Delegates to the explorer"
tools = ["task"]
system_prompt = "You are the NESTER."
"""
WAITER = """\
name = "waiter"
description = "Works for a while"
tools = []
system_prompt = "You are the WAITER."
"""
WRITER = """\
name = "writer"
description = "Writes files"
tools = ["write_file"]
system_prompt = "You are the WRITER."
"""
REPORTER = """\
name = "reporter"
description = "Reports in a schema"
tools = []
system_prompt = "You are the REPORTER."
output_schema = { type = "object", properties = { n = { type = "integer" } }, required = ["n"] }

[completion]
tool = "StructuredOutput"
max_retries = 1
"""
SLEEPER = """\
name = "sleeper"
description = "Works for a long while"
tools = []
system_prompt = "You are the SLEEPER."
"""


def write_agents(folder: Path) -> Path:
    """`folder` with the definitions above (conftest.py's `agents_dir` fixture)."""
    folder.mkdir()
    for name, text in (
        ("explorer", EXPLORER),
        ("nester", NESTER),
        ("waiter", WAITER),
        ("sleeper", SLEEPER),
        ("writer", WRITER),
        ("reporter", REPORTER),
    ):
        (folder / f"{name}.toml").write_text(text)
    return folder


def task(call_id: str, agent: str, prompt: str, **extra: Any) -> dict[str, Any]:
    return tool_call("task", call_id, agent=agent, prompt=prompt, **extra)

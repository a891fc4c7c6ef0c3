"""docs/protocol.md tells the truth (issue 10): every method the server dispatches has an
example, every example line is well-formed JSON-RPC, and its tables are whole tables."""

from __future__ import annotations

import json
import re

from agentd.transport.handlers import METHODS
from tests.support.paths import REPO_ROOT

DOC = REPO_ROOT / "docs" / "protocol.md"


def example_messages() -> list[dict]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("\n## Examples\n", 1)[1].split("\n## ", 1)[0]
    messages = []
    for line in section.splitlines():
        if line.startswith(("→ {", "← {")):
            messages.append(json.loads(line[2:]))
    return messages


def test_every_method_has_an_example_request() -> None:
    requests = {m["method"] for m in example_messages() if "method" in m}
    missing = sorted(set(METHODS) - requests)
    assert missing == [], f"methods without an example in docs/protocol.md: {missing}"


def test_examples_are_json_rpc_and_every_request_is_answered() -> None:
    messages = example_messages()
    assert all(m.get("jsonrpc") == "2.0" for m in messages)
    requests = {m["id"]: m["method"] for m in messages if "method" in m and "id" in m}
    answered = {m["id"] for m in messages if "method" not in m}
    assert set(requests) == answered, "an example request has no response, or a response no request"
    for m in messages:
        if "method" not in m:
            assert ("result" in m) != ("error" in m), m


def test_tables_have_no_stray_rows() -> None:
    """A blank line inside a table makes the rows after it plain text (no header row)."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("|"):
            block = []
            while i < len(lines) and lines[i].startswith("|"):
                block.append(lines[i])
                i += 1
            assert len(block) >= 2 and re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", block[1]), block[0]
        else:
            i += 1

"""`agentd doctor`'s lines and the start-up notes as a table over what was found
(agentd/doctor.py), and where the first start says the page is (agentd/serve.py)."""

from __future__ import annotations

import logging

import pytest

from agentd.doctor import Facts, Status, present_only, report, startup_notes
from agentd.infra.logs import MigrationChatter
from agentd.serve import page_url

ALL = Facts(
    rg="14.1.0",
    bwrap="0.8.0",
    git="2.43.0",
    node="22.11.0",
    database="postgresql+asyncpg://agentd:***@db/agentd",
    redis="redis://cache:6379/0",
    proxies={"https": "http://proxy.corp:3128", "no": "localhost"},
)
NOTHING = Facts(database="sqlite+aiosqlite:////home/u/.agentd/agentd.db")
NO_USERNS = Facts(bwrap="0.8.0", bwrap_problem="no user namespaces")
PG_DOWN = Facts(database="postgresql://x", database_problem="cannot connect")


def by_part(facts: Facts) -> dict[str, tuple[Status, str, str]]:
    return {line.part: (line.status, line.detail, line.effect) for line in report(facts)}


@pytest.mark.parametrize(
    ("facts", "part", "status", "says"),
    [
        (ALL, "ripgrep", Status.PRESENT, "grep runs rg"),
        (NOTHING, "ripgrep", Status.MISSING, "install ripgrep"),
        (ALL, "bubblewrap", Status.PRESENT, "sandboxed"),
        (NOTHING, "bubblewrap", Status.MISSING, "refuses to start"),
        (NO_USERNS, "bubblewrap", Status.FAILED, "seccomp=unconfined"),
        (ALL, "git", Status.PRESENT, "WIP commit"),
        (NOTHING, "git", Status.MISSING, "install git"),
        (ALL, "node", Status.PRESENT, "MCP"),
        (NOTHING, "node", Status.MISSING, "cannot start"),
        (ALL, "database", Status.PRESENT, "several replicas"),
        (NOTHING, "database", Status.PRESENT, "SQLite"),
        (PG_DOWN, "database", Status.FAILED, "cannot connect"),
        (ALL, "redis", Status.PRESENT, "every replica"),
        (NOTHING, "redis", Status.OFF, "AGENTD_REDIS_URL unset"),
        (Facts(redis="redis://r", redis_problem="not reachable"), "redis", Status.FAILED, "not reachable"),
        (ALL, "proxy", Status.PRESENT, "NO_PROXY=localhost"),
        (NOTHING, "proxy", Status.OFF, "connect directly"),
    ],
)  # fmt: skip
def test_one_line_per_part(facts: Facts, part: str, status: Status, says: str) -> None:
    found = by_part(facts)[part]
    assert found[0] is status
    assert says in found[2]


def test_every_part_is_listed_once_with_its_version() -> None:
    lines = report(ALL)
    assert [line.part for line in lines] == [
        "ripgrep", "bubblewrap", "git", "node", "database", "redis", "proxy",
    ]  # fmt: skip
    assert lines[0].render() == "present  ripgrep 14.1.0: grep runs rg (fast; .gitignore honoured)"


def test_a_proxy_password_is_never_shown() -> None:
    facts = Facts(proxies={"https": "http://me:hunter2@proxy:3128"})
    line = by_part(facts)["proxy"]
    assert "hunter2" not in line[1] and "me:***@proxy" in line[1]


def test_startup_notes_name_only_missing_parts_that_degrade_a_feature() -> None:
    assert startup_notes(ALL) == []
    notes = startup_notes(present_only({"rg": None, "bwrap": None, "git": "/usr/bin/git", "node": None}))
    assert [n.split(" ", 1)[0] for n in notes] == ["ripgrep", "node"]  # bwrap: the sandbox's own line
    assert (
        notes[0]
        == "ripgrep not found: grep walks the tree in Python, much slower on large trees: install ripgrep"
    )


@pytest.mark.parametrize(
    ("host", "port", "url"),
    [
        ("127.0.0.1", 8765, "http://127.0.0.1:8765/"),
        ("0.0.0.0", 8765, "http://127.0.0.1:8765/"),
        ("::", 9000, "http://127.0.0.1:9000/"),
        ("::1", 9000, "http://[::1]:9000/"),
        ("agent.lan", 80, "http://agent.lan:80/"),
    ],
)
def test_page_url(host: str, port: int, url: str) -> None:
    assert page_url(host, port) == url


@pytest.mark.parametrize(("root", "shown"), [(logging.INFO, False), (logging.DEBUG, True)])
def test_alembic_info_lines_are_debug(root: int, shown: bool) -> None:
    record = logging.LogRecord("alembic.runtime.migration", logging.INFO, "f", 1, "Running upgrade", (), None)
    previous = logging.getLogger().level
    logging.getLogger().setLevel(root)
    try:
        assert MigrationChatter().filter(record) is shown
    finally:
        logging.getLogger().setLevel(previous)
    assert record.levelname == "DEBUG"
    other = logging.LogRecord("agentd", logging.INFO, "f", 1, "database: x", (), None)
    assert MigrationChatter().filter(other) is True and other.levelname == "INFO"

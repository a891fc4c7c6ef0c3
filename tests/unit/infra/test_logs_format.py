"""The serve log handler: session/turn context on records, and as keys of the JSON format."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from agentd.core.log_context import bind_log_context
from agentd.infra.config import LogFormat
from agentd.infra.logs import log_handler


@pytest.fixture
def logger() -> Iterator[logging.Logger]:
    log = logging.getLogger("agentd.test.logs_format")
    log.propagate, log.level = False, logging.INFO
    yield log
    log.handlers.clear()


def _capture(logger: logging.Logger, fmt: LogFormat) -> io.StringIO:
    out = io.StringIO()
    logger.handlers[:] = [log_handler(fmt, out)]
    return out


@pytest.mark.parametrize(
    ("binding", "expected"),
    [
        ({}, {}),
        ({"session_id": "s1"}, {"session_id": "s1"}),
        ({"session_id": "s1", "turn_id": "t1"}, {"session_id": "s1", "turn_id": "t1"}),
    ],
)
def test_json_lines_carry_the_bound_context(
    logger: logging.Logger, binding: dict[str, str], expected: dict[str, str]
) -> None:
    out = _capture(logger, LogFormat.JSON)
    with bind_log_context(**binding):
        logger.info("turn %s started", "x")
    line = json.loads(out.getvalue())
    assert line["event"] == "turn x started"
    assert {k: line[k] for k in ("session_id", "turn_id") if k in line} == expected


def test_text_lines_stay_as_they_were(logger: logging.Logger) -> None:
    out = _capture(logger, LogFormat.TEXT)
    records: list[logging.LogRecord] = []
    logger.handlers[0].addFilter(lambda r: records.append(r) or True)
    with bind_log_context(session_id="s1", turn_id="t1"):
        logger.info("hello")
    assert out.getvalue().endswith(" INFO agentd.test.logs_format: hello\n")
    assert (records[0].session_id, records[0].turn_id) == ("s1", "t1")  # type: ignore[attr-defined]

"""Issue 28 item 6: a token in a logged URL is redacted in every spelling the server would
read as `token` (percent-encoded, plus-encoded, double-encoded, any case) — and nothing else."""

from __future__ import annotations

import io
import json
import logging

import pytest

from agentd.infra.config import LogFormat
from agentd.infra.logs import decoded_key, log_handler, redact_token

SECRET = "agentd_s3cr3t-VALUE"


@pytest.mark.parametrize(
    "key",
    ["token", "TOKEN", "Token", "tok%65n", "TOK%45N", "%74%6F%6B%65%6E", "%74oken", "tok%2565n", "t%6Fken"],
)
def test_every_spelling_of_token_is_redacted(key: str) -> None:
    line = f"GET /acp?a=1&{key}={SECRET}&b=2 HTTP/1.1"
    redacted = redact_token(line)
    assert SECRET not in redacted
    assert redacted == f"GET /acp?a=1&{key}=***&b=2 HTTP/1.1"


def test_the_first_and_the_only_parameter_are_redacted_too() -> None:
    assert redact_token(f"/acp?tok%65n={SECRET}") == "/acp?tok%65n=***"
    handshake = f'"WebSocket /acp?TOKEN={SECRET}" [accepted]'
    assert redact_token(handshake) == '"WebSocket /acp?TOKEN=***" [accepted]'


def test_other_parameters_stay() -> None:
    for text in ("/a?mytoken=abc&tokens=2", "/a?tok=1&ken=2", "/a?x=token", "no query at all"):
        assert redact_token(text) == text


def test_keys_are_decoded_until_stable() -> None:
    assert decoded_key("tok%2565n") == "token"
    assert decoded_key("%25%37%34oken") == "token"
    assert decoded_key("To+Ken") == "to ken"


@pytest.mark.parametrize("fmt", list(LogFormat))
def test_the_handler_redacts_every_logger_in_both_formats(fmt: LogFormat) -> None:
    out = io.StringIO()
    logger = logging.getLogger("agentd.test_redaction")
    handler = log_handler(fmt, out)
    logger.addHandler(handler)
    logger.propagate = False
    try:
        # A URL split over arguments, as uvicorn's access log passes it.
        logger.warning('%s - "%s %s HTTP/%s" %d', "127.0.0.1:1", "GET", f"/acp?tok%65n={SECRET}", "1.1", 200)
        logger.warning("plain /x?%%54OKEN=%s", SECRET)
    finally:
        logger.removeHandler(handler)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert all(SECRET not in line for line in lines)
    if fmt is LogFormat.JSON:
        events = [json.loads(line)["event"] for line in lines]
        assert "/acp?tok%65n=*** HTTP/1.1" in events[0] and events[1] == "plain /x?%54OKEN=***"

"""The page tests' console check (tests/support/browser.py) in real Chromium: a refused
connection logged while the test's server runs is reported; the page's refused reconnects
once the server began stopping are excused."""

from __future__ import annotations

from typing import Any

from tests.support.browser import SERVER_GONE, ConsoleLog
from tests.support.polling import until
from tests.support.proc import free_port
from tests.support.server import ServerFactory, scripted


def refused(errors: list[str]) -> list[str]:
    return [e for e in errors if SERVER_GONE.search(e)]


async def test_a_refused_connection_during_the_test_body_is_reported(
    server_factory: ServerFactory, browser: Any
) -> None:
    log: ConsoleLog = browser.console_log
    async with server_factory(scripted()) as server:
        page = await browser.new_page()
        await page.goto(server.base_url + "/")
        await page.wait_for_selector("text=connected to agentd")
        other = await browser.new_page()  # about:blank: no CSP in the way of the request
        await other.evaluate("url => fetch(url).catch(() => null)", f"http://127.0.0.1:{free_port()}/")
        await until(lambda: refused(log.errors))
        during = refused(log.unexpected())
        assert during != []  # the fixture would fail the test on it
        await other.close()
    await until(lambda: len(refused(log.errors)) > len(during))  # the page's own reconnects
    assert refused(log.unexpected()) == during  # those are excused; the earlier one is not
    browser.expected_console_errors = SERVER_GONE  # provoked on purpose: let the fixture pass

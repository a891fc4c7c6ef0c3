"""Headless Chromium through Playwright for the web page's tests: the `browser` fixture
(import it into a test module) and `shot`, which saves a screenshot under the test's tmp dir."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = (
    os.environ.get("AGENTD_TEST_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
)


def expect(target: Any) -> Any:
    """Playwright's auto-waiting assertions (`expect(locator).to_have_count(1)`)."""
    api = pytest.importorskip("playwright.async_api")
    return api.expect(target)


# Chromium logs every failed connection itself (the page cannot silence it): a test's server
# stopping before its browser closes makes the page's reconnect attempts log these — refused
# once the socket is gone, or cut (SOCKET_NOT_CONNECTED, RESET, CLOSED, EMPTY_RESPONSE) when a
# stopping server accepted the connection and closed it. Only lines logged once a server began
# stopping (or the test body ended) are excused.
SERVER_GONE = re.compile(
    r"net::ERR_(CONNECTION_REFUSED|SOCKET_NOT_CONNECTED|CONNECTION_RESET|CONNECTION_CLOSED|EMPTY_RESPONSE)"
)


@dataclass
class ConsoleLog:
    """The console errors of one browser's pages, and where its test's server began stopping."""

    errors: list[str] = field(default_factory=list)
    stopping_at: int | None = None  # index of the first line logged after that

    def mark_stopping(self) -> None:
        if self.stopping_at is None:
            self.stopping_at = len(self.errors)

    def unexpected(self, expected: re.Pattern[str] | None = None) -> list[str]:
        """The errors neither `expected` nor a refused connection after the server began stopping."""
        cut = len(self.errors) if self.stopping_at is None else self.stopping_at
        return [
            e
            for i, e in enumerate(self.errors)
            if (expected is None or not expected.search(e)) and not (i >= cut and SERVER_GONE.search(e))
        ]


_OPEN: list[ConsoleLog] = []  # the browsers of the running test


def server_stopping() -> None:
    """Called by the test server as it begins to stop (tests/support/server.py `running_server`)."""
    for log in _OPEN:
        log.mark_stopping()


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is required in CI (apt-get install chromium)")
        pytest.skip("no chromium on this machine")
    playwright_api = pytest.importorskip("playwright.async_api")
    async with playwright_api.async_playwright() as pw:
        b = await pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        log = b.console_log = ConsoleLog()
        watch_console(b, log.errors)
        _OPEN.append(log)
        try:
            yield b
        finally:
            log.mark_stopping()  # the test body is over: its servers may be gone
            _OPEN.remove(log)
            await b.close()
        # Every page of every page test: no console errors (and no CSP violations, which
        # Chromium reports there), except those a test declares it expects.
        unexpected = log.unexpected(getattr(b, "expected_console_errors", None))
        assert unexpected == [], f"console errors on the page: {unexpected}"


def watch_console(b: Any, errors: list[str] | None = None) -> list[str]:
    """Collect the console errors and uncaught exceptions of every page `b` opens."""
    errors = [] if errors is None else errors
    original = b.new_page

    async def new_page_watched(*args: Any, **kwargs: Any) -> Any:
        page = await original(*args, **kwargs)
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        return page

    b.new_page = new_page_watched
    return errors


async def new_page(browser: Any, errors: list[str] | None = None) -> Any:
    """A page whose console errors and CSP violations land in `errors`."""
    page = await browser.new_page(viewport={"width": 1400, "height": 900})
    if errors is not None:
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
    return page


async def shot(page: Any, tmp_path: Path, name: str) -> Path:
    """A full-page screenshot in the test's tmp dir; asserts it was written."""
    path = tmp_path / "screenshots" / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 0
    return path


async def open_session_page(page: Any, base_url: str, session_id: str) -> None:
    await page.goto(base_url + f"/?session={session_id}")
    await page.wait_for_selector(f'#sessions li.current[data-session-id="{session_id}"]')

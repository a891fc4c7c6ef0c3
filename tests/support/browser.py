"""Headless Chromium through Playwright for the web page's tests: the `browser` fixture
(import it into a test module) and `shot`, which saves a screenshot under the test's tmp dir."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import AsyncIterator
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


# Chromium logs every refused connection itself (the page cannot silence it): a test's server
# stopping before its browser closes makes the page's reconnect attempts log these.
SERVER_GONE = re.compile(r"net::ERR_CONNECTION_REFUSED")


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is required in CI (apt-get install chromium)")
        pytest.skip("no chromium on this machine")
    playwright_api = pytest.importorskip("playwright.async_api")
    async with playwright_api.async_playwright() as pw:
        b = await pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        errors = watch_console(b)
        try:
            yield b
        finally:
            await b.close()
        # Every page of every page test: no console errors (and no CSP violations, which
        # Chromium reports there), except those a test declares it expects.
        expected = getattr(b, "expected_console_errors", None)
        unexpected = [
            e for e in errors if (expected is None or not expected.search(e)) and not SERVER_GONE.search(e)
        ]
        assert unexpected == [], f"console errors on the page: {unexpected}"


def watch_console(b: Any) -> list[str]:
    """Collect the console errors and uncaught exceptions of every page `b` opens."""
    errors: list[str] = []
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

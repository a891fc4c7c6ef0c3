"""Fixtures of the transport tests: `browser` (headless Chromium) for the web page's tests."""

from tests.support.browser import browser

__all__ = ["browser"]

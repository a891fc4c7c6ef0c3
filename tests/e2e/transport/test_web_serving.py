"""Issue 17 item 6, served well: the page and its ES modules come from the server with a
Content-Security-Policy, long-lived caching for versioned assets (revalidation for the
page), ETags and 304s — and the browser enforces the policy."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx

from agentd.transport.web import CSP, STATIC_DIR
from tests.support.browser import new_page, shot
from tests.support.server import scripted


async def test_the_page_and_its_modules_have_csp_and_cache_headers(server_factory) -> None:
    async with server_factory(scripted()) as server, httpx.AsyncClient(base_url=server.base_url) as http:
        page = await http.get("/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert page.headers["content-security-policy"] == CSP
        assert page.headers["cache-control"] == "no-cache"
        assert page.headers["x-content-type-options"] == "nosniff"
        assert page.headers["referrer-policy"] == "no-referrer"
        [base] = re.findall(r'src="(/static/[0-9a-f]{16})/app\.js"', page.text)
        again = await http.get("/", headers={"If-None-Match": page.headers["etag"]})
        assert again.status_code == 304 and again.content == b""

        names = sorted(p.relative_to(STATIC_DIR).as_posix() for p in STATIC_DIR.rglob("*.js"))
        assert {"app.js", "render/markdown.js", "vendor/marked.esm.js", "vendor/purify.es.js"} <= set(names)
        for name in names:
            resp = await http.get(f"{base}/{name}")
            assert resp.status_code == 200, name
            assert resp.headers["content-type"].startswith("text/javascript"), name
            assert resp.headers["cache-control"] == "public, max-age=31536000, immutable", name
            assert resp.content == (STATIC_DIR / name).read_bytes()
        css = await http.get(f"{base}/app.css")
        assert css.headers["content-type"].startswith("text/css")
        cached = await http.get(f"{base}/app.js", headers={"If-None-Match": css.headers["etag"]})
        assert cached.status_code == 200  # another file's ETag is no match
        etag = (await http.get(f"{base}/app.js")).headers["etag"]
        assert (await http.get(f"{base}/app.js", headers={"If-None-Match": etag})).status_code == 304
        # A page from before an upgrade still gets the files, but uncached.
        stale = await http.get("/static/0123456789abcdef/app.js")
        assert stale.status_code == 200 and stale.headers["cache-control"] == "no-cache"
        # Only the page's files are served: no notes, no paths out of the folder.
        for bad in ("vendor/README.md", "vendor/purify.LICENSE", "../transport/web.py", "../../auth.py"):
            assert (await http.get(f"{base}/{bad}")).status_code == 404, bad


async def test_the_browser_enforces_the_policy(server_factory, browser: Any, tmp_path: Path) -> None:
    browser.expected_console_errors = re.compile("Content Security Policy")  # provoked below
    async with server_factory(scripted()) as server:
        errors: list[str] = []
        page = await new_page(browser, errors)
        await page.goto(server.base_url + "/")
        await page.wait_for_selector("text=connected to agentd")  # modules and socket allowed
        # An inline script the page might be tricked into adding does not run.
        await page.evaluate(
            """() => { const s = document.createElement('script');
                       s.textContent = 'window.__inline = 1'; document.body.append(s); }"""
        )
        assert await page.evaluate("typeof window.__inline") == "undefined"
        assert any("Content Security Policy" in e for e in errors)
        await shot(page, tmp_path, "connected-under-csp")

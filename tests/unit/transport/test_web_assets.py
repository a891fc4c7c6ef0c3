"""The web page's files (issue 17): plain ES modules under agentd/web/static, every import
resolvable and served, vendored modules byte-identical to their npm releases, no inline
script the Content-Security-Policy would have to allow."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from agentd.transport.web import CSP, STATIC_DIR, WEB_DIR, site

VENDORED = {
    "vendor/marked.esm.js": "29e25cdf1a06075c90e9885af06ddd23fb22a5424ed23a61dda986c73a8af641",
    "vendor/purify.es.js": "5e8c53cd086a012531fc754ee6a7ad7a02e8a06fc4dadd805b912e128c3f6c58",
}
IMPORT = re.compile(r"""^import\s[^;]*?from\s+"([^"]+)";""", re.M)


def own_modules() -> list[Path]:
    return [p for p in STATIC_DIR.rglob("*.js") if "vendor" not in p.parts]


def test_vendored_modules_are_the_published_files() -> None:
    for name, digest in VENDORED.items():
        assert hashlib.sha256((STATIC_DIR / name).read_bytes()).hexdigest() == digest, name
    notes = (STATIC_DIR / "vendor" / "README.md").read_text()
    for name, digest in VENDORED.items():
        assert digest in notes and Path(name).name in notes


def test_every_import_resolves_to_a_served_asset() -> None:
    served = site().assets
    modules = own_modules()
    assert {"app.js", "cards.js", "sessions.js", "transcript.js", "render/markdown.js"} <= {
        p.relative_to(STATIC_DIR).as_posix() for p in modules
    }
    for module in modules:
        for spec in IMPORT.findall(module.read_text()):
            assert spec.startswith("./") or spec.startswith("../"), (module, spec)
            target = (module.parent / spec).resolve().relative_to(STATIC_DIR.resolve()).as_posix()
            assert target in served, (module, spec)


def test_modules_stay_small() -> None:
    for module in own_modules():
        assert len(module.read_text().splitlines()) < 500, module


def test_the_page_has_no_inline_script_or_style() -> None:
    html = (WEB_DIR / "index.html").read_text()
    assert re.findall(r"<script[^>]*>", html) == ['<script type="module" src="{{static}}/app.js">']
    assert "<style" not in html and not re.search(r"\son\w+=", html)  # no inline handlers
    page = site().index.body.decode()
    assert f'src="/static/{site().version}/app.js"' in page
    assert "script-src 'self'" in CSP and "unsafe-inline" not in CSP

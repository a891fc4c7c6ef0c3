"""Issue 31 item 5: the page works from the first keystroke — Send with no session creates
one in the default workspace (shown, with progress), errors read as sentences, at 360 px
New session, the list and the composer come before the queue and usage, task lists keep
their boxes, and the usage panel counts every turn. Screenshots at 1280 and 360 px."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.browser import expect, shot
from tests.support.server import scripted

TASKS = "Steps:\n\n- [x] read the spec\n- [ ] write the parser\n"


async def test_send_without_a_session_creates_one_in_the_default_workspace(
    server_factory, browser: Any, tmp_path: Path
) -> None:
    provider = scripted(
        {"text": TASKS, "usage": {"input_tokens": 100, "output_tokens": 20}},
        {"text": "Second answer."},
        {"text": "Third answer."},
    )
    default = (tmp_path / "home" / "workspaces" / "default").resolve()
    async with server_factory(provider) as server:
        page = await browser.new_page(viewport={"width": 1280, "height": 800})
        await page.goto(server.base_url + "/")
        await expect(page.locator("#sessions li.empty")).to_have_text("no sessions yet")
        # Every text the status line shows, so the progress line is seen however fast it passes.
        await page.evaluate(
            """() => { window.statusSeen = []; const s = document.getElementById("new-session-status");
            new MutationObserver(() => window.statusSeen.push(s.textContent))
              .observe(s, {childList: true, characterData: true, subtree: true}); }"""
        )
        await page.fill("#prompt", "plan it")
        await page.press("#prompt", "Enter")
        await expect(page.locator("#new-session-status")).to_have_text(f"New session in {default}")
        assert "Creating a session…" in await page.evaluate("window.statusSeen")
        await expect(page.locator(".msg.user").first).to_have_text("plan it")
        answer = page.locator(".msg.agent").first
        await expect(answer).to_contain_text("☑ read the spec")
        await expect(answer).to_contain_text("☐ write the parser")
        for text in ("go on", "and again"):
            await page.fill("#prompt", text)
            await page.click("#send")
            await expect(page.locator(".turn-end, .msg.agent")).not_to_have_count(0)
        await expect(page.locator(".msg.agent >> text=Third answer.")).to_have_count(1)
        await expect(page.locator("#sessions li.session")).to_have_count(1)  # one session, not three
        await expect(page.locator('#usage dd[data-key="turns"]')).to_have_text("3")
        await shot(page, tmp_path, "first-keystroke-1280")

        # A folder that is not absolute: a sentence, not a validator dump; nothing created.
        await page.fill("#new-session-cwd", "relative/dir")
        await page.click("#new-session")
        status = page.locator("#new-session-status")
        await expect(status).to_have_text("Could not create a session: cwd must be an absolute path.")
        assert "Value error" not in await status.inner_text()
        await expect(page.locator("#sessions li.session")).to_have_count(1)
    assert default.is_dir()


async def test_at_360_px_new_session_the_list_and_the_composer_come_first(
    server_factory, browser: Any, workspace: Path, tmp_path: Path
) -> None:
    async with server_factory(scripted({"text": "Hello."})) as server:
        page = await browser.new_page(viewport={"width": 360, "height": 740})
        await page.goto(server.base_url + "/")
        await page.fill("#new-session-cwd", str(workspace))
        await page.click("#new-session")
        await expect(page.locator("#sessions li.session")).to_have_count(1)
        await page.fill("#prompt", "hi")
        await page.press("#prompt", "Enter")
        await expect(page.locator(".msg.agent")).to_have_text("Hello.")

        async def top(selector: str) -> float:
            box = await page.locator(selector).bounding_box()
            assert box is not None, selector
            return float(box["y"])

        first = [await top(s) for s in ("#new-session", "#sessions", "#prompt", "#send")]
        later = [await top(s) for s in ("#queue", "#usage")]
        assert max(first) < min(later), (first, later)
        assert await top("#new-session") < await top("#prompt")
        await shot(page, tmp_path, "first-keystroke-360")

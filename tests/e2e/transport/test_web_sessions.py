"""Issue 17 item 3, sessions you can find: the page's list shows each session's title, cwd,
last activity, status (idle / running / waiting for permission / queued N) and who else is
attached. Headless Chromium through Playwright against the real server; each step is
screenshotted and asserted on what the page shows (searching, renaming, forking and
deleting: test_web_session_actions.py; access and paging: test_web_session_access.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentd.infra.config import PermissionMode
from tests.support.browser import expect, new_page, open_session_page, shot
from tests.support.client import text_prompt
from tests.support.gated import GatedProvider
from tests.support.permissions import asked
from tests.support.server import scripted
from tests.support.session import new_session, tool_call


def item(page: Any, sid: str) -> Any:
    return page.locator(f'#sessions li[data-session-id="{sid}"]')


async def test_the_list_shows_title_cwd_activity_status_and_who_else_is_attached(
    server_factory, browser: Any, workspace: Path, tmp_path: Path
) -> None:
    gated = GatedProvider(
        scripted(
            {"text": "a slow answer"},
            {"tool_calls": [tool_call("bash", "c1", command="echo hi")]},
            {"text": "done"},
            loop=True,
        ),
        hold={0},
    )
    async with server_factory(gated, permission_mode=PermissionMode.DEFAULT) as server:
        cli = await server.client()  # created it: attached, someone else than the page
        sid = await new_session(cli, workspace)
        idle = await new_session(cli, workspace)
        await cli.call("session/close", {"sessionId": idle})  # nobody attached to this one
        errors: list[str] = []
        page = await new_page(browser, errors)
        await open_session_page(page, server.base_url, sid)
        mine = item(page, sid)
        await expect(mine.locator(".s-status")).to_have_text("idle")
        await expect(mine.locator(".s-attached")).to_have_text("also here: local")
        await expect(item(page, idle).locator(".s-attached")).to_have_count(0)

        for text in ("refactor the parser", "two", "three"):
            await cli.call("_agentd/prompt/enqueue", text_prompt(sid, text))
        await gated.held(0)  # the first turn streams, then waits: "running" is a fact
        await expect(mine.locator(".s-status")).to_have_text("running")
        await expect(mine.locator(".s-queued")).to_have_text("queued 2")
        await expect(mine.locator(".s-title")).to_have_text("refactor the parser")
        cwd = mine.locator(".s-cwd")  # long: its last two parts, the whole on hover
        assert await cwd.inner_text() == "…/" + "/".join(workspace.parts[-2:])
        assert await cwd.get_attribute("title") == str(workspace)
        assert await mine.locator(".s-time").inner_text() == "just now"
        assert await mine.locator(".s-time").get_attribute("datetime")
        await expect(item(page, idle).locator(".s-status")).to_have_text("idle")
        assert await item(page, idle).locator(".s-queued").count() == 0
        await shot(page, tmp_path, "1-running-queued-2")

        gated.release(0)
        await asked(cli)  # the second prompt's bash call asks
        await expect(mine.locator(".s-status")).to_have_text("waiting for permission")
        await expect(mine.locator(".s-queued")).to_have_text("queued 1")
        await expect(mine).to_have_attribute("data-status", "waiting_permission")
        await shot(page, tmp_path, "2-waiting-for-permission")

        await cli.close()  # the other client leaves: nobody else is attached
        await expect(mine.locator(".s-attached")).to_have_count(0, timeout=15_000)
        assert errors == []

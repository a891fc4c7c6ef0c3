"""Issue 17 item 3 with teams and many sessions: the page offers only what the caller may do
— a watcher gets no rename, delete or fork, a driver renames but does not delete — and
shows who else is attached by principal; a long list pages with "more…". Headless Chromium
through Playwright against the real server, screenshotted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentd.infra.auth import create_token
from agentd.infra.config import AuthMode
from agentd.protocol.agentd import SHARE
from tests.support.browser import expect, new_page, open_session_page, shot
from tests.support.client import WsClient, text_prompt, ws_client
from tests.support.server import scripted
from tests.support.session import new_session


async def as_principal(base_url: str, token: str) -> WsClient:
    return await ws_client(base_url, additional_headers={"Authorization": f"Bearer {token}"})


async def page_as(browser: Any, base_url: str, token: str, sid: str, errors: list[str]) -> Any:
    page = await new_page(browser, errors)
    await page.goto(base_url + f"/?token={token}&session={sid}")
    await page.wait_for_selector(f'#sessions li.current[data-session-id="{sid}"]')
    return page


async def test_a_watcher_sees_no_rename_delete_or_fork_a_driver_renames(
    server_factory, browser: Any, workspace: Path, tmp_path: Path
) -> None:
    async with server_factory(
        scripted({"text": "Here is the plan."}), auth=AuthMode.TOKEN, rate_limit_per_s=0,
        workspace_grants={"alice": [str(workspace)]},
    ) as server:  # fmt: skip
        store = server.app.state.agentd.store
        tokens = {
            who: (await create_token(store, who, teams=teams))[0]
            for who, teams in (("alice", ["core", "crew"]), ("wendy", ["core"]), ("dave", ["crew"]))
        }
        alice = await as_principal(server.base_url, tokens["alice"])
        sid = await new_session(alice, workspace)
        await alice.call("session/prompt", text_prompt(sid, "plan the release"))
        await alice.call(SHARE, {"sessionId": sid, "team": "core", "access": "watch"})
        await alice.call(SHARE, {"sessionId": sid, "team": "crew", "access": "drive"})
        errors: list[str] = []

        wendy = await page_as(browser, server.base_url, tokens["wendy"], sid, errors)
        entry = wendy.locator(f'#sessions li[data-session-id="{sid}"]')
        await expect(entry.locator(".s-attached")).to_have_text("also here: alice")
        await expect(wendy.locator(".msg.agent")).to_have_text("Here is the plan.")
        await entry.hover()
        assert await entry.locator("button.rename").count() == 0
        assert await entry.locator("button.delete").count() == 0
        await expect(wendy.locator(".fork-point")).to_be_hidden()
        await shot(wendy, tmp_path, "1-watcher")

        dave = await page_as(browser, server.base_url, tokens["dave"], sid, errors)
        mine = dave.locator(f'#sessions li[data-session-id="{sid}"]')
        await expect(mine.locator(".s-attached")).to_have_text("also here: alice, wendy")
        await mine.hover()
        assert await mine.locator("button.delete").count() == 0
        await expect(dave.locator(".fork-point")).to_be_hidden()  # forking is the owner's
        await mine.locator("button.rename").click()
        await mine.locator("input.rename-input").fill("release plan")
        await mine.locator("input.rename-input").press("Enter")
        await expect(mine.locator(".s-title")).to_have_text("release plan")
        await expect(entry.locator(".s-title")).to_have_text("release plan")  # the watcher's page
        await shot(dave, tmp_path, "2-driver-renamed")
        listed = (await alice.call("session/list", {}))["sessions"]
        assert [s["title"] for s in listed] == ["release plan"]
        assert errors == []
        await alice.close()


async def test_a_long_list_pages_with_more(
    server_factory, browser: Any, workspace: Path, tmp_path: Path
) -> None:
    async with server_factory(scripted()) as server:
        store = server.app.state.agentd.store
        for i in range(55):
            await store.create_session(
                id=f"sess_{i:03d}", owner="local", cwd=str(workspace), mode="default", model="m"
            )
        errors: list[str] = []
        page = await new_page(browser, errors)
        await open_session_page(page, server.base_url, "sess_054")  # the newest
        await expect(page.locator("#sessions li.session")).to_have_count(50)
        await expect(page.locator("#sessions-more")).to_be_visible()
        await page.click("#sessions-more")
        await expect(page.locator("#sessions li.session")).to_have_count(55)
        await expect(page.locator("#sessions-more")).to_be_hidden()
        ids = await page.locator("#sessions li.session").evaluate_all(
            "els => els.map(e => e.dataset.sessionId)"
        )
        assert ids == [f"sess_{i:03d}" for i in range(54, -1, -1)]  # newest first, each once
        await page.locator("#sessions-more").evaluate("b => b.scrollIntoView()")
        await shot(page, tmp_path, "paged")
        assert errors == []

"""Issue 17 item 3, sessions you can find — acting on them: the page searches, renames
(other pages and clients follow), forks from an answer and deletes after a confirmation.
Headless Chromium through Playwright against the real server; each step is screenshotted
and asserted on what the page shows (the list itself: test_web_sessions.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.browser import expect, new_page, open_session_page, shot
from tests.support.client import text_prompt
from tests.support.server import scripted
from tests.support.session import is_update, new_session


def item(page: Any, sid: str) -> Any:
    return page.locator(f'#sessions li[data-session-id="{sid}"]')


async def test_search_filters_and_rename_updates_every_page(
    server_factory, browser: Any, workspace: Path, tmp_path: Path
) -> None:
    async with server_factory(scripted()) as server:
        cli = await server.client()
        sids = [await new_session(cli, workspace) for _ in range(3)]
        for sid, title in zip(sids, ("Release notes", "Parser bug", "notes for the demo"), strict=True):
            await cli.call("_agentd/session/rename", {"sessionId": sid, "title": title})
        errors: list[str] = []
        page = await new_page(browser, errors)
        await open_session_page(page, server.base_url, sids[1])
        await expect(page.locator("#sessions li.session")).to_have_count(3)

        await page.fill("#session-search", "NOTES")
        await expect(page.locator("#sessions li.session")).to_have_count(2)
        titles = await page.locator("#sessions li.session .s-title").all_inner_texts()
        assert sorted(titles) == ["Release notes", "notes for the demo"]
        await shot(page, tmp_path, "1-search-notes")
        await page.fill("#session-search", "no such thing")
        await expect(page.locator("#sessions li.empty")).to_have_text("no session matches")
        await page.fill("#session-search", "")
        await expect(page.locator("#sessions li.session")).to_have_count(3)

        # Another page watches the session being renamed.
        other = await new_page(browser, errors)
        await open_session_page(other, server.base_url, sids[1])
        await expect(other.locator("#session-title")).to_have_text("Parser bug")

        target = item(page, sids[1])
        await target.hover()
        await target.locator("button.rename").click()
        field = target.locator("input.rename-input")
        await expect(field).to_be_focused()
        await field.fill("Parser: the unicode bug")
        await shot(page, tmp_path, "2-renaming")
        await field.press("Enter")
        await expect(target.locator(".s-title")).to_have_text("Parser: the unicode bug")
        await expect(page.locator("#session-title")).to_have_text("Parser: the unicode bug")
        await shot(page, tmp_path, "3-renamed")
        # The other page and the other client follow.
        await expect(other.locator("#session-title")).to_have_text("Parser: the unicode bug")
        await expect(item(other, sids[1]).locator(".s-title")).to_have_text("Parser: the unicode bug")
        renamed = is_update(sids[1], "session_info_update", title="Parser: the unicode bug")
        await cli.wait_notification(renamed)
        await shot(other, tmp_path, "4-the-other-page")
        listed = (await cli.call("session/list", {}))["sessions"]
        assert {s["sessionId"]: s.get("title") for s in listed}[sids[1]] == "Parser: the unicode bug"

        # Escape keeps the title.
        await target.hover()
        await target.locator("button.rename").click()
        await target.locator("input.rename-input").fill("never saved")
        await target.locator("input.rename-input").press("Escape")
        await expect(target.locator(".s-title")).to_have_text("Parser: the unicode bug")
        assert errors == []
        await cli.close()


async def test_fork_from_an_answer_opens_the_new_session_with_the_history_up_to_it(
    server_factory, browser: Any, workspace: Path, tmp_path: Path
) -> None:
    provider = scripted({"text": "The first answer."}, {"text": "The second answer."}, {"text": "Forked on."})
    async with server_factory(provider) as server:
        cli = await server.client()
        sid = await new_session(cli, workspace)
        await cli.call("session/prompt", text_prompt(sid, "first question"))
        await cli.call("session/prompt", text_prompt(sid, "second question"))
        errors: list[str] = []
        page = await new_page(browser, errors)
        await open_session_page(page, server.base_url, sid)
        await expect(page.locator(".msg")).to_have_count(4)
        first = page.locator(".msg.agent", has_text="The first answer.")
        await first.hover()
        fork = page.locator(".fork-point button.fork").first
        await expect(page.locator(".fork-point button.fork")).to_have_count(2)
        await shot(page, tmp_path, "1-fork-from-here")
        await fork.click()

        new_item = page.locator("#sessions li.current")
        await expect(new_item.locator(".s-title")).to_have_text("fork of first question")
        forked = await new_item.get_attribute("data-session-id")
        assert forked and forked != sid
        await expect(page.locator(".msg")).to_have_count(2)
        assert await page.locator(".msg").all_inner_texts() == ["first question", "The first answer."]
        await expect(page.locator("#session-title")).to_have_text("fork of first question")
        assert "cancelled" not in await page.locator("#transcript").inner_text()  # the whole turn
        await shot(page, tmp_path, "2-forked")

        # The fork goes on from there: its model sees the first exchange only.
        await page.fill("#prompt", "and then?")
        await page.press("#prompt", "Enter")
        await page.wait_for_selector(".msg.agent >> text=Forked on.")
        sent = [m.content for m in provider.requests[-1].messages if m.role in ("user", "assistant")]
        assert "The second answer." not in str(sent) and "The first answer." in str(sent)
        assert errors == []
        await cli.close()


async def test_delete_asks_for_confirmation_and_removes_the_session(
    server_factory, browser: Any, workspace: Path, tmp_path: Path
) -> None:
    async with server_factory(scripted()) as server:
        cli = await server.client()
        keep = await new_session(cli, workspace)
        doomed = await new_session(cli, workspace)
        await cli.call("_agentd/session/rename", {"sessionId": doomed, "title": "old experiment"})
        errors: list[str] = []
        page = await new_page(browser, errors)
        await open_session_page(page, server.base_url, doomed)
        target = item(page, doomed)

        await target.hover()
        await target.locator("button.delete").click()
        dialog = page.locator("dialog#confirm-delete")
        await expect(dialog).to_be_visible()
        await expect(dialog.locator(".question")).to_have_text("Delete “old experiment”?")
        await shot(page, tmp_path, "1-confirm")
        await dialog.locator("button.cancel").click()
        await expect(dialog).to_be_hidden()
        await expect(target).to_have_count(1)  # cancelled: nothing happened
        assert doomed in {s["sessionId"] for s in (await cli.call("session/list", {}))["sessions"]}

        await target.hover()
        await target.locator("button.delete").click()
        await expect(dialog).to_be_visible()
        await dialog.locator("button.confirm-delete").click()
        await expect(target).to_have_count(0)
        await expect(page.locator("#session-title")).to_have_text("No session")
        await expect(item(page, keep)).to_have_count(1)
        await shot(page, tmp_path, "2-deleted")
        assert [s["sessionId"] for s in (await cli.call("session/list", {}))["sessions"]] == [keep]
        await item(page, keep).focus()  # the keyboard opens the one left
        await page.keyboard.press("Enter")
        await expect(page.locator(f'#sessions li.current[data-session-id="{keep}"]')).to_have_count(1)
        assert errors == []
        await cli.close()


async def test_a_session_deleted_or_closed_by_another_client_says_so_on_the_page(
    server_factory, browser: Any, workspace: Path, tmp_path: Path
) -> None:
    provider = scripted({"text": "First answer."}, {"text": "Back again."})
    async with server_factory(provider) as server:
        cli = await server.client()
        doomed = await new_session(cli, workspace)
        closing = await new_session(cli, workspace)
        await cli.call("session/prompt", text_prompt(closing, "hello"))
        errors: list[str] = []
        page = await new_page(browser, errors)

        # Deleted by another client: the page says so and shows no session.
        await open_session_page(page, server.base_url, doomed)
        await expect(item(page, doomed)).to_have_count(1)
        assert await cli.call("session/delete", {"sessionId": doomed}) == {}
        await expect(page.locator(".notice.error")).to_have_text("⚠ This session was deleted.")
        await expect(page.locator("#session-title")).to_have_text("No session")
        await expect(item(page, doomed)).to_have_count(0)
        await shot(page, tmp_path, "1-deleted-elsewhere")

        # Closed by another client: the transcript stays, with a notice; the page does not
        # load the session back by itself; its next prompt does, and the answer shows.
        await item(page, closing).click()
        await expect(page.locator(".msg.agent")).to_have_text(["First answer."])
        assert await cli.call("session/close", {"sessionId": closing}) == {}
        await expect(page.locator(".notice", has_text="Closed by another client")).to_have_count(1)
        await expect(page.locator(".msg.agent")).to_have_text(["First answer."])
        listed = {
            s["sessionId"]: s["_meta"]["agentd"] for s in (await cli.call("session/list", {}))["sessions"]
        }
        assert listed[closing]["attached"] == [], listed[closing]  # not loaded back by the page
        await shot(page, tmp_path, "2-closed-elsewhere")
        await page.fill("#prompt", "are you there?")
        await page.press("#prompt", "Enter")
        await expect(page.locator(".msg.agent")).to_have_text(["First answer.", "Back again."])
        assert errors == []
        await cli.close()

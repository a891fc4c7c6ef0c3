"""Issue 17 item 4, the queue on the web page: edit in place (the entry is held while the
editor is open and released after), drag to reorder, remove, combine, send now and
interject during a running turn; and a version conflict shown when another client changed
the entry first. Headless Chromium through Playwright against the real server; each step
is screenshotted and checked against the server's own queue."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agentd.infra.config import PermissionMode
from tests.support.browser import expect, new_page, open_session_page, shot
from tests.support.client import WsClient, text_prompt
from tests.support.gated import GatedProvider
from tests.support.polling import until
from tests.support.server import scripted


async def server_queue(cli: WsClient, sid: str) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = (await cli.call("_agentd/queue/list", {"sessionId": sid}))["queue"]
    return listed


async def texts_of(cli: WsClient, sid: str) -> list[str]:
    return [e["text"] for e in await server_queue(cli, sid)]


def releases(cli: WsClient, sid: str) -> int:
    """How many `queue_update` changes this client saw that left an entry not held."""
    return sum(
        1
        for f in cli.frames
        if f.get("method") == "_agentd/event"
        and f["params"]["sessionId"] == sid
        and f["params"]["kind"] == "queue_update"
        for c in f["params"]["event"]["changes"]
        if c["change"] == "updated" and not c["entry"].get("held")
    )


def entry(page: Any, text: str) -> Any:
    return page.locator("#queue li.q-entry", has_text=text)


async def enqueue_from_page(page: Any, text: str) -> None:
    await page.fill("#prompt", text)
    await page.press("#prompt", "Enter")
    await entry(page, text).wait_for()


async def test_edit_reorder_remove_combine_interject_and_send_now_from_the_page(
    server_factory, browser: Any, workspace: Path, tmp_path: Path
) -> None:
    inner = scripted(
        {"text": "Working on the long job."},  # 0: held until the queue work is done
        {"text": "Noted the steer."},  # 1: the same turn, after the interjection
        {"text": "Combined answer."},  # 2: the combined prompt's turn, held, then cancelled
        {"text": "Urgent answer."},  # 3: the send-now prompt
        {"text": "Later answer."},  # 4
    )
    provider = GatedProvider(inner, hold={0, 2})
    async with server_factory(provider, permission_mode=PermissionMode.BYPASS) as server:
        cli = await server.client()
        sid = (await cli.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
        errors: list[str] = []
        page = await new_page(browser, errors)
        await open_session_page(page, server.base_url, sid)
        running = asyncio.create_task(cli.request("session/prompt", text_prompt(sid, "the long job")))
        await provider.held(0)
        await page.wait_for_selector("#status.running")

        for text in ("alpha", "beta", "gamma"):
            await enqueue_from_page(page, text)
        assert await texts_of(cli, sid) == ["alpha", "beta", "gamma"]

        # Edit in place: held while the editor is open, the edit lands, then released.
        await entry(page, "alpha").locator("button.edit").click()
        editor = page.locator("#queue li.editing textarea")
        await editor.wait_for()
        await expect(page.locator("#queue li.editing")).to_contain_text("held while you edit")
        assert [e.get("held", False) for e in await server_queue(cli, sid)] == [True, False, False]
        await editor.fill("alpha, edited in place")
        await shot(page, tmp_path, "queue-editing")
        await page.locator("#queue li.editing button.save").click()
        await expect(page.locator("#queue li.editing")).to_have_count(0)
        await expect(page.locator("#queue .q-text")).to_have_text(["alpha, edited in place", "beta", "gamma"])
        queued = await server_queue(cli, sid)
        assert [e["text"] for e in queued] == ["alpha, edited in place", "beta", "gamma"]
        assert not any(e.get("held") for e in queued) and queued[0]["version"] == 2
        await shot(page, tmp_path, "queue-edited")

        # Drag gamma above the first entry.
        await entry(page, "gamma").locator(".q-text").drag_to(entry(page, "alpha").locator(".q-text"))
        await expect(page.locator("#queue .q-text")).to_have_text(["gamma", "alpha, edited in place", "beta"])
        assert await texts_of(cli, sid) == ["gamma", "alpha, edited in place", "beta"]
        await shot(page, tmp_path, "queue-dragged")

        # Remove beta; combine the other two.
        await entry(page, "beta").locator("button.remove").click()
        await expect(page.locator("#queue .q-text")).to_have_text(["gamma", "alpha, edited in place"])
        assert await texts_of(cli, sid) == ["gamma", "alpha, edited in place"]
        await page.click("#queue-combine")
        await expect(page.locator("#queue .q-text")).to_have_text(["gamma\n\nalpha, edited in place"])
        assert await texts_of(cli, sid) == ["gamma\n\nalpha, edited in place"]
        await shot(page, tmp_path, "queue-combined")

        # Interject into the running turn, from the composer and a queued entry: the model's
        # next round sees both, in the same turn.
        await page.fill("#prompt", "steer: mention the caveats")
        await page.click("#interject")
        await page.wait_for_selector(".msg.user.interjected >> text=steer: mention the caveats")
        await enqueue_from_page(page, "steer: and the costs")
        await entry(page, "steer: and the costs").locator("button.interject").click()
        await page.wait_for_selector(".msg.user.interjected >> text=steer: and the costs")
        await expect(page.locator("#queue .q-text")).to_have_text(["gamma\n\nalpha, edited in place"])
        provider.release(0)
        assert (await running)["result"]["stopReason"] == "end_turn"
        seen = [(m.role, m.content) for m in provider.requests[1].messages]
        assert seen[-2:] == [("user", "steer: mention the caveats"), ("user", "steer: and the costs")]
        await page.wait_for_selector(".msg.agent >> text=Noted the steer.")
        await shot(page, tmp_path, "queue-interjected")

        # The combined prompt runs (held); "later" waits; "urgent" is sent now: the running
        # turn is cancelled and "urgent" runs before "later".
        await provider.held(2)
        await page.wait_for_selector(".msg.user >> text=alpha, edited in place")
        await enqueue_from_page(page, "later")
        await page.fill("#prompt", "urgent")
        await page.click("#send-now")
        await page.wait_for_selector(".msg.agent >> text=Later answer.")
        provider.release(2)
        users = await page.locator(".msg.user").all_inner_texts()
        assert users == [
            "the long job",
            "steer: mention the caveats",
            "steer: and the costs",
            "gamma\n\nalpha, edited in place",
            "urgent",
            "later",
        ]
        assert await page.locator(".msg.agent", has_text="Urgent answer.").count() == 1
        assert await page.locator(".turn-end", has_text="cancelled").count() == 1
        await shot(page, tmp_path, "queue-sent-now")
        assert await texts_of(cli, sid) == []
        assert errors == []
        await cli.close()


async def test_a_conflicting_edit_from_another_client_is_shown_and_resolved(
    server_factory, browser: Any, workspace: Path, tmp_path: Path
) -> None:
    provider = GatedProvider(scripted({"text": "busy"}, {"text": "ran the edit"}), hold={0})
    async with server_factory(provider, permission_mode=PermissionMode.BYPASS) as server:
        cli = await server.client()
        sid = (await cli.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
        errors: list[str] = []
        page = await new_page(browser, errors)
        await open_session_page(page, server.base_url, sid)
        running = asyncio.create_task(cli.request("session/prompt", text_prompt(sid, "keep busy")))
        await provider.held(0)
        await enqueue_from_page(page, "run the tests")

        await entry(page, "run the tests").locator("button.edit").click()
        editor = page.locator("#queue li.editing textarea")
        await editor.wait_for()
        await editor.fill("run the unit tests")
        (queued,) = await server_queue(cli, sid)
        assert queued["held"] is True and queued["version"] == 1
        theirs = await cli.call(
            "_agentd/queue/edit",
            {"sessionId": sid, "id": queued["id"], "expectedVersion": 1, "text": "run the e2e tests"},
        )
        assert theirs["applied"] is True

        # The page saves against the version it saw: refused, and the conflict is shown.
        await page.locator("#queue li.editing button.save").click()
        conflict = page.locator("#queue li.editing .conflict")
        await expect(conflict).to_contain_text("Another client changed this prompt")
        await expect(conflict.locator(".theirs")).to_have_text("run the e2e tests")
        assert await editor.input_value() == "run the unit tests"  # the user's text is kept
        assert await texts_of(cli, sid) == ["run the e2e tests"]
        await shot(page, tmp_path, "queue-conflict")

        # "Save mine" saves over their version; the hold is released.
        await page.locator("#queue li.editing button.use-mine").click()
        await expect(page.locator("#queue li.editing")).to_have_count(0)
        await expect(page.locator("#queue .q-text")).to_have_text(["run the unit tests"])
        (queued,) = await server_queue(cli, sid)
        assert queued["text"] == "run the unit tests" and queued["version"] == 3 and not queued.get("held")
        await shot(page, tmp_path, "queue-conflict-resolved")

        # Leaving the page while editing lets go of the hold.
        await entry(page, "run the unit tests").locator("button.edit").click()
        await editor.wait_for()
        assert (await server_queue(cli, sid))[0]["held"] is True
        holds_released = releases(cli, sid)
        await page.goto(server.base_url + "/")
        await until(lambda: releases(cli, sid) > holds_released, within=10)
        assert not (await server_queue(cli, sid))[0].get("held")
        provider.release(0)
        await running
        assert errors == []
        await cli.close()

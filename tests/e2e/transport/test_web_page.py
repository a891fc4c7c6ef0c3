"""R-O: the built-in web page at `/` — watch a session live, send prompts, manage the
queue, answer permission requests — driven in headless Chromium (the machine's
`chromium`, through Playwright) against the real server."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from agentd.infra.config import PermissionMode
from tests.support.browser import expect
from tests.support.client import agent_text, text_prompt
from tests.support.server import scripted


async def test_the_page_is_served_at_the_root(server_factory) -> None:
    async with server_factory(scripted()) as server:
        async with httpx.AsyncClient(base_url=server.base_url) as http:
            resp = await http.get("/")
        assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/html")
        assert 'id="transcript"' in resp.text


async def test_prompt_from_the_page_answer_a_permission_and_watch_the_answer_stream(
    server_factory, browser: Any, workspace: Path
) -> None:
    provider = scripted(
        {
            "text": "Writing the notes now.",
            "tool_calls": [
                {"name": "write_file", "arguments": {"path": "notes.txt", "content": "from the page\n"}}
            ],
        },
        {"text": "All done."},
    )
    async with server_factory(provider, permission_mode=PermissionMode.DEFAULT) as server:
        page = await browser.new_page()
        await page.goto(server.base_url + "/")
        await page.wait_for_selector("text=connected to agentd")
        await page.fill("#new-session-cwd", str(workspace))
        await page.click("#new-session")
        await page.wait_for_selector("#sessions li.current")
        await page.fill("#prompt", "write the notes please")
        await page.press("#prompt", "Enter")

        allow = page.locator('.permission button[data-option-id="allow_once"]')
        await allow.wait_for()
        assert not (workspace / "notes.txt").exists()  # waits for the answer
        await allow.click()
        await page.wait_for_selector(".msg.agent >> text=All done.")
        await page.wait_for_selector('.tool[data-status="completed"]')
        await page.wait_for_selector("#status.idle")
        assert (workspace / "notes.txt").read_text() == "from the page\n"
        texts = await page.locator(".msg").all_inner_texts()
        assert texts == ["write the notes please", "Writing the notes now.", "All done."]
        assert await page.locator(".permission").count() == 0


async def test_the_page_watches_another_clients_session_and_manages_its_queue(
    server_factory, browser: Any, workspace: Path
) -> None:
    provider = scripted(
        {"text": "Working on the long job…", "chunk_size": 4, "chunk_delay": 0.05, "delay": 0.5},
        {"text": "still working", "delay": 30},
        {"text": "second queued answer"},
    )
    async with server_factory(provider) as server:
        cli = await server.client()
        sid = (await cli.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]

        page = await browser.new_page()
        await page.goto(server.base_url + f"/?session={sid}")
        await page.wait_for_selector(f'#sessions li.current[data-session-id="{sid}"]')

        # Another client prompts; the page streams the answer live.
        first = asyncio.create_task(cli.call("session/prompt", text_prompt(sid, "the long job")))
        await page.wait_for_selector(".msg.agent >> text=Working on the long job…")
        assert (await first)["stopReason"] == "end_turn"
        assert agent_text(cli.updates(sid)) == "Working on the long job…"
        await page.wait_for_selector(".msg.user >> text=the long job")

        # A turn runs; two prompts wait. The page shows the queue and removes one.
        running = asyncio.create_task(cli.request("session/prompt", text_prompt(sid, "keep going")))
        await page.wait_for_selector("#status.running")
        for text in ("queued one", "queued two"):
            await cli.call("_agentd/prompt/enqueue", text_prompt(sid, text))
        await page.wait_for_selector("#queue li >> text=queued two")
        await page.locator("#queue li", has_text="queued one").locator("button.remove").click()
        # (wait_for_function would need 'unsafe-eval', which the page's CSP refuses)
        await expect(page.locator("#queue li")).to_have_count(1)
        listed = await cli.call("_agentd/queue/list", {"sessionId": sid})
        assert [e["text"] for e in listed["queue"]] == ["queued two"]

        # Cancel from the page stops the running turn; the queue then runs.
        await page.click("#cancel")
        assert (await running)["result"]["stopReason"] == "cancelled"
        await page.wait_for_selector(".msg.agent >> text=second queued answer")
        await cli.close()


async def test_the_page_connects_with_a_token_when_the_server_needs_one(
    server_factory, browser: Any, workspace: Path
) -> None:
    from agentd.infra.auth import create_token
    from agentd.infra.config import AuthMode

    async with server_factory(
        scripted({"text": "hello from a token session"}),
        auth=AuthMode.TOKEN,
        workspace_grants={"erin": [workspace]},  # outside erin's own root
    ) as server:
        token, _ = await create_token(server.app.state.agentd.store, "erin")
        page = await browser.new_page()
        await page.goto(server.base_url + "/")  # no token yet: the sign-in screen
        await page.wait_for_selector("#signin-token")
        await page.goto(server.base_url + f"/?token={token}")
        await page.wait_for_selector("text=connected to agentd")
        await page.fill("#new-session-cwd", str(workspace))
        await page.click("#new-session")
        await page.wait_for_selector("#sessions li.current")
        await page.fill("#prompt", "hi")
        await page.click("#send")
        await page.wait_for_selector(".msg.agent >> text=hello from a token session")
        assert len(await server.app.state.agentd.store.list_sessions(owner="erin")) == 1


async def test_a_command_that_exits_non_zero_shows_as_failed(
    server_factory, browser: Any, workspace: Path
) -> None:
    """Issue 10 item 8: a shell call that exited non-zero is a completed tool call for the
    model but a failure for the reader."""
    provider = scripted(
        {"tool_calls": [{"name": "bash", "arguments": {"command": "echo oops; exit 3"}, "id": "call_bad"}]},
        {"tool_calls": [{"name": "bash", "arguments": {"command": "echo fine"}, "id": "call_ok"}]},
        {"text": "Done."},
    )
    async with server_factory(provider, permission_mode=PermissionMode.BYPASS) as server:
        cli = await server.client()
        sid = (await cli.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
        assert (await cli.call("session/prompt", text_prompt(sid, "run it")))["stopReason"] == "end_turn"
        page = await browser.new_page()
        await page.goto(server.base_url + f"/?session={sid}")
        bad = page.locator('.tool[data-tool-call-id="call_bad"]')
        await bad.wait_for()
        await page.wait_for_selector('.tool[data-tool-call-id="call_ok"][data-status="completed"]')
        assert await bad.get_attribute("data-status") == "failed"
        assert await bad.get_attribute("data-exit-code") == "3"
        assert "exit 3" in await bad.inner_text()
        await cli.close()

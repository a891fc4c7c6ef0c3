"""Issue 33 item 5 on the page: the session's model picker lists what the provider serves
(with context windows), switches the session's model, and Refresh asks the provider again;
a `web_fetch` permission card shows the URL it will fetch. Headless Chromium through
Playwright against the real server and the fake OpenAI provider."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentd.infra.config import PermissionMode
from agentd.providers.openai import OpenAIProvider
from tests.support.browser import expect, new_page, shot
from tests.support.fakes.openai_server import Completion, FakeOpenAI, ToolCallScript
from tests.support.session import open_session


async def test_the_model_picker_lists_switches_and_refreshes(
    server_factory, browser: Any, workspace: Path, tmp_path: Path
) -> None:
    async with FakeOpenAI() as fake:
        fake.models = [{"id": "test-model"}, {"id": "big-model", "context_length": 200000}]
        provider = OpenAIProvider(base_url=fake.base_url, api_key="sk-test", model="test-model")
        async with server_factory(provider, model="test-model", models_ttl_s=600) as server:
            errors: list[str] = []
            page = await new_page(browser, errors)
            await page.goto(server.base_url + "/")
            await page.wait_for_selector("text=connected to agentd")
            await page.fill("#new-session-cwd", str(workspace))
            await page.click("#new-session")
            await page.wait_for_selector("#sessions li.current")

            picker = page.locator("#model")
            await expect(picker).to_be_visible()
            shown = ["test-model · 128k context", "big-model · 200k context"]
            await expect(picker.locator("option")).to_have_text(shown)
            await expect(picker).to_have_value("test-model")
            await expect(page.locator("#model-note")).to_have_text("1 served by the provider")
            await shot(page, tmp_path, "1-picker")

            await picker.select_option("big-model")
            # Once the server has confirmed the switch, another client sees the new model.
            await expect(picker).to_have_attribute("data-current", "big-model")
            client = await server.client()
            sid = await page.locator("#sessions li.current").get_attribute("data-session-id")
            resumed = await client.call("session/resume", {"sessionId": sid, "cwd": str(workspace)})
            model = next(o for o in resumed["configOptions"] if o["id"] == "model")
            assert model["currentValue"] == "big-model"

            fake.models.append({"id": "new-model"})
            await page.click("#models-refresh")
            await expect(picker.locator("option")).to_have_count(3)
            await expect(picker).to_have_value("big-model")
            await expect(page.locator("#model-note")).to_have_text("2 served by the provider")
            await shot(page, tmp_path, "2-refreshed")
            assert errors == []


async def test_a_web_fetch_permission_card_shows_the_url(
    server_factory, browser: Any, workspace: Path, tmp_path: Path
) -> None:
    url = "https://docs.python.org/3/library/asyncio.html"
    async with FakeOpenAI() as fake:
        fake.enqueue(
            Completion(
                tool_calls=[
                    ToolCallScript(id="c_fetch", name="web_fetch", arguments=json.dumps({"url": url}))
                ]
            ),
            Completion.from_text("done"),
        )
        provider = OpenAIProvider(base_url=fake.base_url, api_key="sk-test", model="test-model")
        async with server_factory(
            provider, model="test-model", permission_mode=PermissionMode.DEFAULT
        ) as server:
            client = await server.client()
            sid = (await open_session(client, workspace))["sessionId"]
            errors: list[str] = []
            page = await new_page(browser, errors)
            await page.goto(server.base_url + f"/?session={sid}")
            await page.wait_for_selector(f'#sessions li.current[data-session-id="{sid}"]')
            await page.fill("#prompt", "read the asyncio docs")
            await page.press("#prompt", "Enter")

            card = page.locator('.tool[data-tool-call-id="c_fetch"]')
            await card.locator(".permission").wait_for()
            await expect(card.locator(".detail.fetch code.url")).to_have_text(url)
            await expect(card.locator(".title")).to_have_text(f"Fetch {url}")
            await shot(page, tmp_path, "3-fetch-card")
            await page.keyboard.press("n")  # rejected: nothing is fetched from the test
            await expect(card.locator(".state")).to_have_text("failed")
            assert errors == []

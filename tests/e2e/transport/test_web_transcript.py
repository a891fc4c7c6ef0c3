"""Issue 17 item 2, a readable transcript: sanitised markdown (hostile model text stays
text), highlighted code blocks with copy buttons, folded reasoning, tool cards with status
and streamed output, the pinned plan, usage and cost per turn and per session, the goal,
compaction markers, and a prompt sent during a turn waiting in the queue. Headless
Chromium through Playwright against the real server; each item is screenshotted."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agentd.infra.config import PermissionMode
from agentd.protocol.agentd import COMPACT
from tests.support.browser import expect, new_page, open_session_page, shot
from tests.support.client import text_prompt
from tests.support.server import scripted
from tests.support.session import tool_call

HOSTILE = """## Report

Some **bold** text and a [safe link](https://example.org/docs).

<script>window.__pwned = 1</script>

<img src="x" onerror="window.__pwned = 2">

<iframe src="https://evil.example/"></iframe>

[click me](javascript:window.__pwned=3)

<a href="javascript:window.__pwned=4" onclick="window.__pwned=5">raw link</a>

![pixel](javascript:alert(1))

<svg onload="window.__pwned=6"></svg>

<div style="position:fixed;inset:0" class="permission">fake prompt</div>

```python
def add(a, b):
    # the sum
    return a + b  # </code></pre><script>window.__pwned = 7</script>
```
"""
REASONING = "First I check the inputs, then I write the report."


async def test_markdown_is_rendered_sanitised_with_code_blocks_and_folded_reasoning(
    server_factory, browser: Any, workspace: Path, tmp_path: Path
) -> None:
    provider = scripted({"reasoning": REASONING, "text": HOSTILE})
    async with server_factory(provider) as server:
        cli = await server.client()
        sid = (await cli.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
        errors: list[str] = []
        page = await new_page(browser, errors)
        await page.context.grant_permissions(["clipboard-read", "clipboard-write"])
        await open_session_page(page, server.base_url, sid)
        done = await cli.call("session/prompt", text_prompt(sid, "write the report"))
        assert done["stopReason"] == "end_turn"

        msg = page.locator(".msg.agent")
        await msg.locator("h2").wait_for()
        assert await msg.locator("h2").inner_text() == "Report"
        assert await msg.locator("strong").inner_text() == "bold"
        safe = msg.locator('a[href="https://example.org/docs"]')
        assert await safe.get_attribute("rel") == "noopener noreferrer"
        # Hostile markup is shown as text or dropped: nothing executable, nothing injected.
        hostile = (
            "script, iframe, svg, [onerror], [onclick], [onload], [style], a[href^='javascript'], "
            "img[src^='javascript'], .permission"
        )
        assert await msg.locator(hostile).count() == 0
        assert await page.locator("#transcript .permission, #transcript script").count() == 0
        text = await msg.inner_text()
        assert "<script>window.__pwned = 1</script>" in text  # shown, not run
        assert '<img src="x" onerror="window.__pwned = 2">' in text
        hrefs = await msg.locator("a").evaluate_all("els => els.map(a => a.getAttribute('href'))")
        assert set(hrefs) <= {"https://example.org/docs", None}
        assert "click me" in text and await msg.locator("a", has_text="click me").count() == 1
        assert await msg.locator("img").count() == 1  # ![pixel](javascript:…) without its src
        assert await msg.locator("img").get_attribute("src") is None
        assert await page.evaluate("typeof window.__pwned") == "undefined"
        # The code block: its language, coloured tokens, the hostile comment as plain code.
        block = msg.locator(".codeblock")
        assert await block.count() == 1
        assert await block.locator(".lang").inner_text() == "python"
        assert set(await block.locator(".tok-kw").all_inner_texts()) >= {"def", "return"}
        assert (await block.locator(".tok-com").all_inner_texts())[0] == "# the sum"
        code = await block.locator("code").inner_text()
        assert code.endswith("return a + b  # </code></pre><script>window.__pwned = 7</script>")
        await block.locator("button.copy").click()
        await expect(block.locator("button.copy")).to_have_text("copied")
        assert await page.evaluate("navigator.clipboard.readText()") == code
        # Reasoning: folded, with its size; the text is there once opened.
        thought = page.locator("details.thought")
        assert await thought.get_attribute("open") is None
        assert await thought.locator("summary").inner_text() == "Reasoning · 10 words"
        assert not await thought.locator(".body").is_visible()
        await shot(page, tmp_path, "1-markdown-folded-reasoning")
        await thought.locator("summary").click()
        await expect(thought.locator(".body")).to_have_text(REASONING)
        await shot(page, tmp_path, "2-reasoning-open")
        assert [e for e in errors if "Content Security Policy" in e] == []
        await cli.close()


async def test_tool_cards_stream_output_and_a_prompt_sent_during_a_turn_waits_in_the_queue(
    server_factory, browser: Any, workspace: Path, tmp_path: Path
) -> None:
    wait_for_go = "echo first-part; while [ ! -f go ]; do sleep 0.05; done; echo second-part"
    provider = scripted(
        {"tool_calls": [tool_call("bash", "c_wait", command=wait_for_go)]},
        {"tool_calls": [tool_call("bash", "c_fail", command="echo broken >&2; exit 3")]},
        {"text": "First answer."},
        {"text": "Second answer."},
    )
    async with server_factory(provider, permission_mode=PermissionMode.BYPASS) as server:
        page = await new_page(browser)
        await page.goto(server.base_url + "/")
        await page.wait_for_selector("text=connected to agentd")
        await page.fill("#new-session-cwd", str(workspace))
        await page.click("#new-session")
        await page.wait_for_selector("#sessions li.current")
        await page.fill("#prompt", "run the job")
        await page.press("#prompt", "Enter")

        # The running command: its card says so and shows the output as it comes.
        card = page.locator('.tool[data-tool-call-id="c_wait"]')
        await expect(card.locator(".output")).to_have_text("first-part\n")
        assert await card.get_attribute("data-status") == "in_progress"
        assert await card.locator(".state").inner_text() == "running"
        # A prompt sent now waits in the queue; it is not put above the running answer.
        await page.fill("#prompt", "and then this")
        await page.press("#prompt", "Enter")
        await expect(page.locator("#queue .q-text")).to_have_text(["and then this"])
        assert await page.locator(".msg.user").all_inner_texts() == ["run the job"]
        await shot(page, tmp_path, "1-running-card-and-queue")

        await asyncio.to_thread((workspace / "go").touch)
        await expect(card).to_have_attribute("data-status", "completed")
        await expect(card.locator(".output")).to_have_text("first-part\nsecond-part\n")
        assert await card.locator(".state").inner_text() == "ok"
        failed = page.locator('.tool[data-tool-call-id="c_fail"]')
        await expect(failed).to_have_attribute("data-status", "failed")
        assert await failed.locator(".state").inner_text() == "failed · exit 3"
        assert "broken" in await failed.locator(".output").inner_text()

        await page.wait_for_selector(".msg.agent >> text=Second answer.")
        await expect(page.locator("#queue li")).to_have_count(0)
        order = await page.locator(".msg").all_inner_texts()
        assert order == ["run the job", "First answer.", "and then this", "Second answer."]
        await shot(page, tmp_path, "2-cards-done")


async def test_plan_usage_cost_goal_and_compaction_are_shown(
    server_factory, browser: Any, workspace: Path, tmp_path: Path
) -> None:
    usage = {"input_tokens": 1000, "output_tokens": 200}
    todos = [
        {"content": "Read the spec", "status": "completed"},
        {"content": "Write the parser", "status": "in_progress"},
        {"content": "Ship it", "status": "pending"},
    ]
    provider = scripted(
        {"tool_calls": [tool_call("todo_write", "c_todo", todos=todos)], "usage": usage},
        {"text": "Planned.", "usage": usage},
        {"text": "Second turn.", "usage": usage},
        {"text": "Third turn.", "usage": usage},
        {"text": "The user asked for a plan; it was made.", "expect": "Summarise this conversation"},
    )
    prices = {"priced-model": {"input": 3.0, "output": 15.0}}
    async with server_factory(
        provider,
        permission_mode=PermissionMode.BYPASS,
        model="priced-model",
        prices=prices,
        limits={"todo_gate": {"max_nudges": 0}},  # open todos do not extend the turn here
    ) as server:
        cli = await server.client()
        sid = (await cli.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
        page = await new_page(browser)
        await open_session_page(page, server.base_url, sid)
        for prompt in ("make a plan", "go on", "and again"):
            assert (await cli.call("session/prompt", text_prompt(sid, prompt)))["stopReason"] == "end_turn"

        # The plan is pinned in the side panel, with each entry's state.
        await expect(page.locator("#plan li")).to_have_count(3)
        assert await page.locator("#plan li").evaluate_all("els => els.map(e => e.dataset.status)") == [
            "completed",
            "in_progress",
            "pending",
        ]
        assert "Write the parser" in await page.locator("#plan li").nth(1).inner_text()
        # Per turn: tokens and cost under each turn; per session: the sums.
        await expect(page.locator(".turn-end")).to_have_count(3)
        first_turn = await page.locator(".turn-end").nth(0).inner_text()
        assert first_turn == "2000 in · 400 out · $0.0120"  # two model calls in the first turn
        assert await page.locator(".turn-end").nth(2).inner_text() == "1000 in · 200 out · $0.0060"
        table = dict(zip(
            await page.locator("#usage dt").all_inner_texts(),
            await page.locator("#usage dd").all_inner_texts(),
            strict=True,
        ))  # fmt: skip
        assert table["turns"] == "3" and table["input"] == "4000" and table["output"] == "800"
        assert table["cost"] == "$0.0240"
        assert await page.locator("#session-usage").inner_text() == "4800 tokens · $0.0240"

        # The goal another client sets shows with its state.
        goal = {"sessionId": sid, "objective": "Ship the parser", "tokenBudget": 50000}
        await cli.call("_agentd/goal/set", goal)
        await expect(page.locator("#goal .goal-objective")).to_have_text("Ship the parser")
        assert await page.locator("#goal .goal-status").inner_text() == "active"
        assert "0 / 50.0k tokens" in await page.locator("#goal").inner_text()

        # A compaction leaves a marker with the summary folded under it.
        result = await cli.call(COMPACT, {"sessionId": sid})
        assert result["compacted"] is True
        marker = page.locator("details.compaction")
        await expect(marker).to_have_attribute("data-status", "completed")
        assert "conversation compacted" in await marker.locator("summary").inner_text()
        await marker.locator("summary").click()
        await expect(marker.locator(".body")).to_have_text("The user asked for a plan; it was made.")
        await shot(page, tmp_path, "plan-usage-goal-compaction")

        # A reload replays the same: the plan, the usage, the goal, the marker.
        await page.reload()
        await expect(page.locator(".turn-end")).to_have_count(3)
        await expect(page.locator("#plan li")).to_have_count(3)
        await expect(page.locator("#session-usage")).to_have_text("4800 tokens · $0.0240")
        await expect(page.locator("#goal .goal-objective")).to_have_text("Ship the parser")
        await expect(page.locator("details.compaction")).to_have_count(1)
        await cli.close()

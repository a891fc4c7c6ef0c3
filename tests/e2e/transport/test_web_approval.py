"""Issue 17 item 1, approve with eyes open: the page's permission cards show what a call
will do — an edit's diff, a new file's content (folded when long), a command and its cwd,
an MCP call's arguments — and `y` / `a` / `n` answer the focused request. Headless
Chromium through Playwright against the real server; each step is screenshotted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentd.infra.config import PermissionMode
from tests.support.browser import expect, new_page, open_session_page, shot
from tests.support.client import text_prompt
from tests.support.mcp import calc_stdio
from tests.support.server import scripted
from tests.support.session import tool_call

NEW_FILE = "".join(f"line_{i} = {i}\n" for i in range(1, 61))  # 60 lines: folded


async def test_permission_cards_show_diffs_new_files_and_commands_and_answer_by_keyboard(
    server_factory, browser: Any, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "app.py").write_text("def greet():\n    return 'hi'\n\nprint(greet())\n")
    provider = scripted(
        {
            "tool_calls": [
                tool_call("edit_file", "c_edit", path="app.py", old_string="'hi'", new_string="'hello'"),
                tool_call("write_file", "c_new", path="gen/table.py", content=NEW_FILE),
                tool_call("bash", "c_bash", command="echo ran > ran.txt"),
            ]
        },
        {"text": "unused"},
    )
    async with server_factory(provider, permission_mode=PermissionMode.DEFAULT) as server:
        errors: list[str] = []
        page = await new_page(browser, errors)
        await page.goto(server.base_url + "/")
        await page.wait_for_selector("text=connected to agentd")
        await page.fill("#new-session-cwd", str(workspace))
        await page.click("#new-session")
        await page.wait_for_selector("#sessions li.current")
        await page.fill("#prompt", "tidy up")
        await page.press("#prompt", "Enter")

        # 1. The edit: a unified diff of the file, coloured, before anything is written.
        edit = page.locator('.tool[data-tool-call-id="c_edit"]')
        await edit.locator(".permission").wait_for()
        assert await edit.locator(".dl.del .code").all_inner_texts() == ["    return 'hi'"]
        assert await edit.locator(".dl.add .code").all_inner_texts() == ["    return 'hello'"]
        assert await edit.locator(".dl .sign").all_inner_texts() == [" ", "-", "+", " ", " "]
        header = await edit.locator(".diff-path").inner_text()
        assert header.split() == [str(workspace / "app.py"), "+1", "−1"]
        assert "return" in await edit.locator(".dl.add .tok-kw").all_inner_texts()
        assert "'hello'" in await edit.locator(".dl.add .tok-str").all_inner_texts()
        assert "return 'hi'" in (workspace / "app.py").read_text()  # still waiting
        await expect(edit.locator(".permission")).to_be_focused()  # the new request has focus
        await shot(page, tmp_path, "1-edit-diff")
        await page.keyboard.press("y")

        # 2. The new file: every line, folded because it is long; `y` answers it.
        new = page.locator('.tool[data-tool-call-id="c_new"]')
        await new.locator(".permission").wait_for()
        await expect(new.locator(".permission")).to_be_focused()
        assert "new file · 60 lines" in await new.locator(".diff.new-file .diff-path").inner_text()
        fold = new.locator("details.fold")
        assert await fold.get_attribute("open") is None
        assert not await new.locator(".dl.add").first.is_visible()
        await shot(page, tmp_path, "2-new-file-folded")
        await fold.locator("summary").click()
        await expect(new.locator(".dl.add")).to_have_count(60)
        assert await new.locator(".dl.add .code").nth(59).inner_text() == "line_60 = 60"
        await shot(page, tmp_path, "3-new-file-unfolded")
        await new.locator(".permission").focus()
        await page.keyboard.press("y")

        # 3. The command: exactly what runs and where; `n` rejects it.
        cmd = page.locator('.tool[data-tool-call-id="c_bash"]')
        await cmd.locator(".permission").wait_for()
        assert await cmd.locator(".detail.command pre").inner_text() == "$ echo ran > ran.txt"
        assert await cmd.locator(".detail.command .cwd").inner_text() == f"in {workspace}"
        await shot(page, tmp_path, "4-command")
        await cmd.locator(".permission").focus()
        await page.keyboard.press("n")

        await page.wait_for_selector("#status.idle")
        assert (workspace / "app.py").read_text().startswith("def greet():\n    return 'hello'\n")
        assert (workspace / "gen" / "table.py").read_text() == NEW_FILE
        assert not (workspace / "ran.txt").exists()  # rejected
        assert await page.locator(".permission").count() == 0
        await expect(edit).to_have_attribute("data-status", "completed")
        assert await cmd.get_attribute("data-status") == "failed"
        # After the run, the edit's card keeps the diff of what was written.
        assert await edit.locator(".dl.add .code").all_inner_texts() == ["    return 'hello'"]
        await shot(page, tmp_path, "5-after")
        assert errors == []


async def test_an_mcp_calls_arguments_are_shown_and_a_answers_always(
    server_factory, browser: Any, workspace: Path, tmp_path: Path
) -> None:
    provider = scripted(
        {"tool_calls": [tool_call("mcp__calc__add", "c_add", a=2, b=40)]},
        {"tool_calls": [tool_call("mcp__calc__add", "c_add2", a=1, b=1)]},
        {"text": "The sum is 42."},
    )
    async with server_factory(provider, permission_mode=PermissionMode.DEFAULT) as server:
        cli = await server.client()
        new = {"cwd": str(workspace), "mcpServers": [calc_stdio()]}
        sid = (await cli.call("session/new", new))["sessionId"]
        page = await new_page(browser)
        await open_session_page(page, server.base_url, sid)
        await cli.call("_agentd/prompt/enqueue", text_prompt(sid, "add them"))

        card = page.locator('.tool[data-tool-call-id="c_add"]')
        await card.locator(".permission").wait_for()
        assert await card.locator(".detail.args .detail-label").inner_text() == "MCP calc → add"
        assert json.loads(await card.locator(".detail.args pre").inner_text()) == {"a": 2, "b": 40}
        [asked] = cli.server_requests
        assert asked["params"]["toolCall"]["_meta"]["agentd"]["mcpTool"] == "add"
        await shot(page, tmp_path, "mcp-arguments")
        await card.locator(".permission").focus()
        await page.keyboard.press("a")  # always allow: the second call does not ask
        await page.wait_for_selector(".msg.agent >> text=The sum is 42.")
        assert len(cli.server_requests) == 1
        second = page.locator('.tool[data-tool-call-id="c_add2"]')
        await expect(second).to_have_attribute("data-status", "completed")
        await cli.close()

"""Issue 33 on the web page: the side panel's "Changes" lists every file the session changed
with its diff and a Revert button; "Export" downloads the session's .jsonl and "Import a
session" turns such a file back into a session. Headless Chromium against the real server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentd.infra.config import PermissionMode
from agentd.store.export_codec import decode
from tests.support.browser import expect, new_page, open_session_page, shot
from tests.support.client import text_prompt
from tests.support.server import scripted
from tests.support.session import new_session, tool_call


def _edits() -> list[dict[str, Any]]:
    return [
        {"tool_calls": [tool_call("edit_file", "c1", path="a.txt", old_string="zero", new_string="one")]},
        {"text": "edited a"},
        {"tool_calls": [tool_call("write_file", "c2", path="new.txt", content="created\n")]},
        {"text": "made new"},
    ]


async def test_changes_view_shows_diffs_and_reverts_one_file(
    server_factory, browser: Any, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "a.txt").write_text("zero\n")
    async with server_factory(scripted(*_edits()), permission_mode=PermissionMode.BYPASS) as server:
        cli = await server.client()
        sid = await new_session(cli, workspace)
        await cli.call("session/prompt", text_prompt(sid, "edit a"))
        errors: list[str] = []
        page = await new_page(browser, errors)
        await open_session_page(page, server.base_url, sid)
        a = page.locator('#changes li.change[data-path="a.txt"]')
        await expect(a.locator(".change-status")).to_have_text("modified")

        await cli.call("session/prompt", text_prompt(sid, "make new"))  # the view follows the turns
        new = page.locator('#changes li.change[data-path="new.txt"]')
        await expect(new.locator(".change-status")).to_have_text("added")
        await a.locator("summary").click()
        await expect(a.locator(".cl.del")).to_have_text("-zero\n")
        await expect(a.locator(".cl.add")).to_have_text("+one\n")
        await shot(page, tmp_path, "changes")

        await a.locator(".change-revert").click()

        await expect(a).to_have_count(0)
        await expect(page.locator("#changes-note")).to_have_text("Reverted a.txt.")
        assert (workspace / "a.txt").read_text() == "zero\n"
        assert (workspace / "new.txt").read_text() == "created\n"
        await shot(page, tmp_path, "reverted")
        assert errors == []
        await cli.close()


async def test_export_downloads_the_session_and_import_opens_it(
    server_factory, browser: Any, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "a.txt").write_text("zero\n")
    async with server_factory(scripted(*_edits()), permission_mode=PermissionMode.BYPASS) as server:
        cli = await server.client()
        sid = await new_session(cli, workspace)
        await cli.call("session/prompt", text_prompt(sid, "edit a"))
        page = await new_page(browser)
        await open_session_page(page, server.base_url, sid)

        async with page.expect_download() as waiting:
            await page.locator("#session-export").click()
        download = await waiting.value
        saved = tmp_path / download.suggested_filename
        await download.save_as(str(saved))

        assert saved.name == f"{sid}.jsonl"
        bundle = decode(saved.read_bytes())
        assert bundle.session["id"] == sid and bundle.snapshots
        await page.locator("#session-import").set_input_files(str(saved))
        await expect(page.locator("#import-status")).to_contain_text("Imported as sess_")
        copy = (await page.locator("#import-status").inner_text()).split()[2]
        assert copy != sid  # beside its original: a new id
        await expect(page.locator(f'#sessions li.current[data-session-id="{copy}"]')).to_have_count(1)
        await expect(page.locator('#changes li.change[data-path="a.txt"]')).to_have_count(1)
        await shot(page, tmp_path, "imported")
        await cli.close()

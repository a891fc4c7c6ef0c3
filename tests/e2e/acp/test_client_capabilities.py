"""R-T6: when the prompting client advertised `fs.readTextFile` / `fs.writeTextFile` /
`terminal`, the file and shell tools go through it (an editor's unsaved buffers, its
terminal); otherwise they run on the server. Workspace confinement and permissions apply
either way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentd.infra.config import PermissionMode
from tests.support.client import AnswerError, WsClient, text_prompt
from tests.support.server import scripted

EDITOR_CAPS = {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True}


class Editor:
    """The client side of `fs/*` and `terminal/*`: buffers in memory, a fake terminal."""

    def __init__(self, buffers: dict[str, str]) -> None:
        self.buffers = buffers
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def __call__(self, msg: dict[str, Any]) -> dict[str, Any]:
        method, params = msg["method"], msg["params"]
        self.calls.append((method, params))
        match method:
            case "session/request_permission":
                return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
            case "fs/read_text_file":
                return {"content": self.buffers[params["path"]]}
            case "fs/write_text_file":
                self.buffers[params["path"]] = params["content"]
                return {}
            case "terminal/create":
                return {"terminalId": "term-1"}
            case "terminal/wait_for_exit":
                return {"exitCode": 3}
            case "terminal/output":
                return {
                    "output": "ran in the editor's terminal\n",
                    "truncated": False,
                    "exitStatus": {"exitCode": 3},
                }
            case "terminal/release" | "terminal/kill":
                return {}
        raise AssertionError(f"unexpected request {method}")


def tool_results(provider: Any) -> dict[str, str]:
    return {m.tool_call_id: m.content for m in provider.requests[-1].messages if m.role == "tool"}


async def test_file_and_shell_tools_go_through_the_editor(server_factory, workspace: Path) -> None:
    notes = workspace / "notes.txt"
    notes.write_text("saved on disk\n")
    provider = scripted(
        {
            "tool_calls": [
                {"name": "read_file", "arguments": {"path": "notes.txt"}, "id": "r"},
                {"name": "write_file", "arguments": {"path": "new.txt", "content": "fresh\n"}, "id": "w"},
            ]
        },
        {
            "tool_calls": [
                {
                    "name": "edit_file",
                    "arguments": {"path": "notes.txt", "old_string": "unsaved", "new_string": "edited"},
                    "id": "e",
                }
            ]
        },
        {"tool_calls": [{"name": "bash", "arguments": {"command": "make test"}, "id": "b"}]},
        {"text": "done"},
    )
    async with server_factory(provider, permission_mode=PermissionMode.DEFAULT) as server:
        editor = Editor({str(notes): "unsaved buffer text\n", str(workspace / "new.txt"): ""})
        client = await WsClient.connect(server.base_url, **EDITOR_CAPS)
        client.on_request = editor
        sid = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
        assert (await client.call("session/prompt", text_prompt(sid, "work")))["stopReason"] == "end_turn"
        await client.close()

    results = tool_results(provider)
    assert "unsaved buffer text" in results["r"]  # the buffer, not the saved file
    assert results["r"].startswith("     1\t")  # the same rendering as a disk read
    assert editor.buffers[str(workspace / "new.txt")] == "fresh\n"
    assert not (workspace / "new.txt").exists()  # written by the editor, not on disk
    assert editor.buffers[str(notes)] == "edited buffer text\n"
    assert notes.read_text() == "saved on disk\n"
    assert "ran in the editor's terminal" in results["b"] and "[exit code 3]" in results["b"]
    create = next(p for m, p in editor.calls if m == "terminal/create")
    assert create["args"] == ["-c", "make test"] and create["cwd"] == str(workspace)
    methods = [m for m, _ in editor.calls]
    assert methods.index("terminal/release") > methods.index("terminal/output")
    # Permission was still asked for the write, the edit and the command.
    assert methods.count("session/request_permission") == 3


async def test_a_prompt_from_a_client_without_those_capabilities_runs_on_the_server(
    server_factory, workspace: Path
) -> None:
    provider = scripted(
        {
            "tool_calls": [
                {"name": "write_file", "arguments": {"path": "a.txt", "content": "disk\n"}, "id": "w"}
            ]
        },
        {"text": "done"},
    )
    async with server_factory(provider, permission_mode=PermissionMode.BYPASS) as server:
        editor = Editor({})
        watcher = await WsClient.connect(server.base_url, **EDITOR_CAPS)  # an editor only watching
        watcher.on_request = editor
        plain = await server.client()
        sid = (await plain.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
        await watcher.call("_agentd/session/attach", {"sessionId": sid, "afterSeq": 0})
        await plain.call("session/prompt", text_prompt(sid, "write"))
        assert (workspace / "a.txt").read_text() == "disk\n"
        assert editor.calls == []
        for c in (plain, watcher):
            await c.close()


async def test_paths_outside_the_workspace_never_reach_the_editor(server_factory, workspace: Path) -> None:
    provider = scripted(
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "../../etc/passwd"}, "id": "r"}]},
        {"text": "done"},
    )
    async with server_factory(provider) as server:
        editor = Editor({})
        client = await WsClient.connect(server.base_url, **EDITOR_CAPS)
        client.on_request = editor
        sid = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
        await client.call("session/prompt", text_prompt(sid, "peek"))
        await client.close()
    assert "outside" in tool_results(provider)["r"]
    assert [m for m, _ in editor.calls if m.startswith("fs/")] == []


class NewFileEditor(Editor):
    """An editor with no buffer for the file: `fs/read_text_file` answers -32002."""

    async def __call__(self, msg: dict[str, Any]) -> dict[str, Any]:
        if msg["method"] == "fs/read_text_file" and msg["params"]["path"] not in self.buffers:
            self.calls.append((msg["method"], msg["params"]))
            raise AnswerError(-32002, "Resource not found")
        return await super().__call__(msg)


async def test_a_missing_file_in_the_editor_means_a_new_file(server_factory, workspace: Path) -> None:
    """Issue 12 item 5: -32002 from fs/read_text_file is "new file" for write_file."""
    provider = scripted(
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "new.py", "content": "x\n"}}]},
        {"text": "created"},
    )
    async with server_factory(provider, permission_mode=PermissionMode.BYPASS) as server:
        editor = NewFileEditor({})
        client = await WsClient.connect(server.base_url, **EDITOR_CAPS)
        client.on_request = editor
        try:
            sid = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
            done = await client.call("session/prompt", text_prompt(sid, "create it"))
            assert done["stopReason"] == "end_turn"
        finally:
            await client.close()
    target = str(workspace / "new.py")
    assert editor.buffers[target] == "x\n"
    assert [m for m, _ in editor.calls] == ["fs/read_text_file", "fs/write_text_file"]
    assert next(iter(tool_results(provider).values())).startswith("Created new.py")


async def test_a_command_in_the_editors_terminal_is_embedded_before_release(
    server_factory, workspace: Path
) -> None:
    """Issue 12 item 5: the tool call shows `{type: terminal, terminalId}` while the
    terminal still exists, so the editor renders its live output."""
    provider = scripted(
        {"tool_calls": [{"name": "bash", "arguments": {"command": "make test"}, "id": "b"}]},
        {"text": "done"},
    )
    async with server_factory(provider, permission_mode=PermissionMode.BYPASS) as server:
        client = await WsClient.connect(server.base_url, **EDITOR_CAPS)
        embedded_at_release: list[bool] = []
        inner = Editor({})

        async def editor(msg: dict[str, Any]) -> dict[str, Any]:
            if msg["method"] == "terminal/release":
                embedded_at_release.append(
                    any(
                        {"type": "terminal", "terminalId": "term-1"} in (u.get("content") or [])
                        for u in client.updates()
                        if u["sessionUpdate"] == "tool_call_update"
                    )
                )
            return await inner(msg)

        client.on_request = editor
        try:
            sid = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
            done = await client.call("session/prompt", text_prompt(sid, "test"))
            assert done["stopReason"] == "end_turn"
            finals = [u for u in client.updates(sid) if u["sessionUpdate"] == "tool_call_update"]
            final = [u for u in finals if u.get("status")][-1]
        finally:
            await client.close()
    assert embedded_at_release == [True]
    assert {"type": "terminal", "terminalId": "term-1"} in final["content"]


class FailingReadEditor(Editor):
    """An editor whose `fs/read_text_file` fails for files it has no buffer for, the way
    stock clients do: -32002 (the schema's "not found"), acpx's -32603 ENOENT, or -32601 from
    a client that does not implement the method."""

    def __init__(self, buffers: dict[str, str], code: int, message: str) -> None:
        super().__init__(buffers)
        self.code, self.message = code, message

    async def __call__(self, msg: dict[str, Any]) -> dict[str, Any]:
        if msg["method"] == "fs/read_text_file" and msg["params"]["path"] not in self.buffers:
            self.calls.append((msg["method"], msg["params"]))
            raise AnswerError(self.code, self.message)
        return await super().__call__(msg)


READ_FAILURES = [
    (-32002, "Resource not found"),
    (-32603, "Internal error: ENOENT: no such file or directory, open '/w/new.py'"),
    (-32601, "Method not found"),
]


@pytest.mark.parametrize(("code", "message"), READ_FAILURES)
async def test_write_file_goes_ahead_whatever_error_the_pre_read_gets(
    server_factory, workspace: Path, code: int, message: str
) -> None:
    """Issue 29 item 2: any error of write_file's pre-read means "no known old content"; the
    permission question's preview shows the new file whole, saying why."""
    provider = scripted(
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "new.py", "content": "x\n"}}]},
        {"text": "written"},
    )
    async with server_factory(provider) as server:
        editor = FailingReadEditor({}, code, message)
        client = await WsClient.connect(server.base_url, **EDITOR_CAPS)
        client.on_request = editor
        try:
            sid = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
            done = await client.call("session/prompt", text_prompt(sid, "create it"))
            assert done["stopReason"] == "end_turn"
        finally:
            await client.close()
    target = str(workspace / "new.py")
    assert editor.buffers[target] == "x\n"  # written through the editor
    (asked,) = [p for m, p in editor.calls if m == "session/request_permission"]
    content = asked["toolCall"]["content"]
    assert {"type": "diff", "path": target, "newText": "x\n"} in [
        {k: v for k, v in item.items() if k != "oldText"} for item in content if item["type"] == "diff"
    ]
    assert not any(item.get("oldText") for item in content if item["type"] == "diff")
    result = next(iter(tool_results(provider).values()))
    if code == -32002:
        assert result.startswith("Created new.py") and not any(i["type"] == "content" for i in content)
    else:
        assert result.startswith("Wrote new.py") and "new file or unreadable" in result and message in result
        notes = [i["content"]["text"] for i in content if i["type"] == "content"]
        assert any("new file or unreadable" in n and message in n for n in notes), notes


@pytest.mark.parametrize(("code", "message"), READ_FAILURES)
async def test_edit_file_names_the_clients_answer_when_it_cannot_read(
    server_factory, workspace: Path, code: int, message: str
) -> None:
    """Issue 29 item 2: edit_file needs the old text; the client's refusal is a clear tool
    error naming what the client said, and nothing is written."""
    provider = scripted(
        {
            "tool_calls": [
                {"name": "edit_file", "arguments": {"path": "a.py", "old_string": "x", "new_string": "y"}}
            ]
        },
        {"text": "told"},
    )
    async with server_factory(provider, permission_mode=PermissionMode.BYPASS) as server:
        editor = FailingReadEditor({}, code, message)
        client = await WsClient.connect(server.base_url, **EDITOR_CAPS)
        client.on_request = editor
        try:
            sid = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
            await client.call("session/prompt", text_prompt(sid, "edit it"))
        finally:
            await client.close()
    assert "fs/write_text_file" not in [m for m, _ in editor.calls]
    result = next(iter(tool_results(provider).values()))
    assert "a.py" in result if code == -32002 else message in result, result

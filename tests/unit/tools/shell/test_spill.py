"""Long output: head and tail for the model, the full output in a capped log in the
workspace, the newest logs kept, no symlink followed, and a stop at the output limit
(issue 13, item 6)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentd.tools.base import ToolContext
from agentd.tools.shell.background import BackgroundTasks, TaskOutput
from agentd.tools.shell.bash import OUTPUT_CAP, Bash
from agentd.tools.shell.launch import ShellLauncher
from agentd.tools.shell.output import ShellOutput
from agentd.tools.shell.spill import SPILL_DIR, Spill


def logs(ws: Path) -> list[Path]:
    d = ws / SPILL_DIR
    return sorted(d.glob("bash-*.log")) if d.is_dir() else []


def test_short_output_writes_no_file(tmp_path: Path) -> None:
    spill = Spill(tmp_path, threshold=100)
    spill.write(b"hello\n")
    spill.close(needed=False)
    assert spill.path is None and logs(tmp_path) == []


def test_needed_at_the_end_the_buffered_output_becomes_the_file(tmp_path: Path) -> None:
    spill = Spill(tmp_path, threshold=100)
    spill.write(b"a" * 50)
    spill.write(b"b" * 40)
    spill.close(needed=True)
    assert spill.path is not None
    assert (tmp_path / spill.path).read_bytes() == b"a" * 50 + b"b" * 40
    assert (tmp_path / SPILL_DIR / ".gitignore").read_text() == "*\n"  # logs stay out of git status


def test_past_the_threshold_output_streams_to_the_file_and_stops_at_the_cap(tmp_path: Path) -> None:
    spill = Spill(tmp_path, threshold=10, cap=1000)
    for i in range(30):
        spill.write(bytes([65 + i % 26]) * 100)
    assert spill.path is not None and spill.capped and spill.saved == 1000
    assert len(spill._buffer) == 0  # nothing held in memory once the file exists
    spill.close(needed=True)
    data = (tmp_path / spill.path).read_bytes()
    assert data.startswith(b"A" * 100 + b"B" * 100)
    assert data[:1000] == b"".join(bytes([65 + i % 26]) * 100 for i in range(10))
    assert b"log cut at 1000 bytes" in data[1000:]


def test_only_the_newest_logs_are_kept(tmp_path: Path) -> None:
    d = tmp_path / SPILL_DIR
    d.mkdir(parents=True)
    for i in range(25):
        p = d / f"bash-old-{i:02d}.log"
        p.write_text("x")
        os.utime(p, (1000 + i, 1000 + i))
    (d / "notes.txt").write_text("not a log")  # other files are left alone
    spill = Spill(tmp_path, threshold=0, keep=20)
    spill.write(b"new")
    spill.close(needed=True)
    names = [p.name for p in logs(tmp_path)]
    assert len(names) == 20
    assert spill.path is not None and spill.path.name in names
    assert "bash-old-24.log" in names and "bash-old-05.log" not in names  # the oldest went
    assert (d / "notes.txt").exists()


def test_a_symlinked_output_dir_is_not_followed(tmp_path: Path) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    (ws / ".agentd").mkdir(parents=True)
    outside.mkdir()
    (ws / ".agentd" / "output").symlink_to(outside)
    out = ShellOutput(10, spill=Spill(ws, threshold=5))
    out.feed(b"x" * 100)
    out.finish()
    assert list(outside.iterdir()) == []  # nothing written through the link
    assert out.spill is not None and out.spill.error is not None
    assert any("could not be saved" in line for line in out.notes())


def test_shell_output_decodes_split_characters_and_stops_at_the_limit(tmp_path: Path) -> None:
    hits: list[int] = []
    out = ShellOutput(100, limit=10, on_limit=lambda: hits.append(1))
    snowman = "☃".encode()
    out.feed(snowman[:1])
    out.feed(snowman[1:] + b"abc")
    assert out.render() == "☃abc"
    out.feed(b"0123456789")
    out.feed(b"more")  # past the limit: read, not kept
    assert out.over_limit and hits == [1] and out.bytes == 10
    out.finish()
    assert out.render() == "☃abc0123"
    assert "more than 10 bytes of output and was stopped" in out.notes()[0]


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(cwd=tmp_path, session_id="s")


async def test_bash_long_output_names_the_log_and_how_to_read_it(ctx: ToolContext) -> None:
    res = await Bash().run({"command": "seq 1 200000"}, ctx)
    assert res.raw_output is not None and res.raw_output["truncated"] is True
    rel = res.raw_output["outputFile"]
    assert rel.startswith(".agentd/output/bash-") and rel.endswith(".log")
    full = (ctx.cwd / rel).read_text()
    assert full == "".join(f"{i}\n" for i in range(1, 200001))  # everything, not head and tail
    assert res.output.startswith("1\n2\n") and "\n200000\n" in res.output
    assert f"is in {rel}" in res.output and "read_file" in res.output and "tail -c" in res.output
    assert len(res.output) < OUTPUT_CAP + 1000


async def test_bash_short_output_leaves_no_log(ctx: ToolContext) -> None:
    res = await Bash().run({"command": "seq 1 10"}, ctx)
    assert res.raw_output is not None and "outputFile" not in res.raw_output
    assert logs(ctx.cwd) == []


async def test_yes_is_stopped_by_the_output_limit(ctx: ToolContext) -> None:
    limit = 2 * 1024 * 1024
    res = await Bash(ShellLauncher(output_limit=limit)).run({"command": "yes"}, ctx)
    assert res.is_error
    assert res.raw_output is not None and res.raw_output["outputLimit"] is True
    assert f"more than {limit} bytes of output and was stopped" in res.output
    assert res.output.startswith("y\ny\n")
    log = ctx.cwd / res.raw_output["outputFile"]
    assert log.stat().st_size == limit  # exactly what was taken in, under the 64 MiB cap


async def test_a_background_tasks_long_output_names_its_log(tmp_path: Path) -> None:
    bg = BackgroundTasks()
    ctx = ToolContext(cwd=tmp_path, session_id="s", background=bg)
    task_id = bg.start("seq 1 100000; echo LAST", tmp_path)
    assert (await bg.wait(task_id, 60)).reason == "done"
    res = await TaskOutput().run({"task_id": task_id}, ctx)
    [log] = logs(tmp_path)
    assert f"is in {log.relative_to(tmp_path).as_posix()}" in res.output
    assert log.read_text().endswith("100000\nLAST\n")
    assert res.output.endswith(f"[task {task_id} finished with exit code 0]")
    await bg.close()

"""`agentd session export|import` (issue 33 item 1) as a real subprocess: the export goes to
standard output, the import reports one line; a corrupt, newer or missing file is refused
with one line and exit 2, and nothing of it is imported."""

from __future__ import annotations

from pathlib import Path

from agentd.infra.auth import LOCAL_PRINCIPAL
from agentd.store.db import Store
from agentd.store.export_codec import decode
from tests.support.cli import agentd, clean_env
from tests.support.databases import premigrate_sqlite
from tests.support.replay import seeded_session


async def _sessions(url: str) -> int:
    store = await Store.open(url)
    try:
        return await store.count_sessions(LOCAL_PRINCIPAL)
    finally:
        await store.close()


async def test_export_to_stdout_and_import_elsewhere(tmp_path: Path) -> None:
    source = f"sqlite+aiosqlite:///{tmp_path / 'a.db'}"
    target = f"sqlite+aiosqlite:///{tmp_path / 'b.db'}"
    await premigrate_sqlite(source)
    await premigrate_sqlite(target)
    store = await Store.open(source)
    try:
        sid = await seeded_session(store, tmp_path, 40)
    finally:
        await store.close()
    env = clean_env(tmp_path)

    run = await agentd("session", "export", sid, "--database-url", source, env=env, cwd=tmp_path)

    assert run.code == 0, run.err
    bundle = decode(run.out.encode())
    assert len(bundle.events) == 40 and bundle.session["id"] == sid
    (tmp_path / "s.jsonl").write_text(run.out)
    run = await agentd("session", "import", "s.jsonl", "--database-url", target, env=env, cwd=tmp_path)
    assert run.code == 0 and run.out.strip() == (
        f"imported {sid} (40 events, 0 messages, 0 files) working in {tmp_path}"
    ), run.text
    assert await _sessions(target) == 1


async def test_bad_files_are_refused_with_one_line_and_import_nothing(tmp_path: Path) -> None:
    source = f"sqlite+aiosqlite:///{tmp_path / 'a.db'}"
    await premigrate_sqlite(source)
    store = await Store.open(source)
    try:
        sid = await seeded_session(store, tmp_path, 10)
    finally:
        await store.close()
    env = clean_env(tmp_path)
    good = (await agentd("session", "export", sid, "--database-url", source, env=env, cwd=tmp_path)).out
    target = f"sqlite+aiosqlite:///{tmp_path / 'b.db'}"
    await premigrate_sqlite(target)
    cases = {
        "truncated.jsonl": (good[: len(good) // 2], "the file is truncated"),
        "edited.jsonl": (good.replace("prompt 1", "prompt 9"), "does not match its checksum"),
        "newer.jsonl": (good.replace('"version":1', '"version":7', 1), "format version 7 is newer"),
        "foreign.jsonl": ('{"hello": 1}\n', "not an agentd session export"),
    }
    for name, (text, message) in cases.items():
        (tmp_path / name).write_text(text)
        run = await agentd("session", "import", name, "--database-url", target, env=env, cwd=tmp_path)
        assert run.code == 2 and run.out == "", (name, run.text)
        lines = run.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("agentd: error: cannot import: "), (name, run.err)
        assert message in lines[0], (name, lines[0])
    (tmp_path / "good.jsonl").write_text(good)
    run = await agentd(
        "session", "import", "good.jsonl", "--cwd", "nowhere", "--database-url", target, env=env, cwd=tmp_path
    )
    assert run.code == 2 and run.err.strip() == "agentd: error: --cwd: nowhere is not an existing folder"
    run = await agentd("session", "import", "absent.jsonl", "--database-url", target, env=env, cwd=tmp_path)
    assert run.code == 2 and run.err.strip().startswith("agentd: error: cannot read absent.jsonl")
    assert await _sessions(target) == 0

    run = await agentd("session", "export", "sess_nope", "--database-url", source, env=env, cwd=tmp_path)
    assert run.code == 1 and run.out == "" and run.err.strip() == "agentd: no session sess_nope"

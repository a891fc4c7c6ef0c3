"""Session export and import (issue 33 item 1), shared by `agentd session export|import` and
`_agentd/session/export|import`: the store's rows (`store/export_rows.py`) in the format of
`store/export_codec.py`, optionally with the workspace's files.

An import checks the whole file before it writes anything, then writes the session in one
transaction; workspace files it carries are written only into files that do not exist yet
(or already hold the same bytes) — a conflict refuses the import before anything changes.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from agentd.infra import Settings
from agentd.store import (
    ExportFormatError,
    ImportConflict,
    SessionBundle,
    Store,
    decode,
    encode_all,
    read_bundle,
    write_bundle,
)
from agentd.tools import ToolError, Walk, ignore_rules, parent_dir, read_existing, replace_atomically

MIN_SECRET_CHARS = 6  # shorter "secrets" would redact ordinary words


class PortabilityError(ValueError):
    """An export or import refused; the message is one line for the user."""


def secret_values(settings: Settings) -> list[str]:
    """The server's secrets (API keys, the database URL and its password): never exported."""
    found = [settings.database_url, settings.openai_api_key, settings.anthropic_api_key]
    found += [lane.api_key for lane in settings.fallbacks]
    values = [s.get_secret_value() for s in found if s is not None]
    url = settings.database_url.get_secret_value() if settings.database_url else ""
    if "://" in url and "@" in url.split("://", 1)[1]:  # the password alone, too
        creds = url.split("://", 1)[1].split("@", 1)[0]
        values.append(creds.split(":", 1)[1] if ":" in creds else "")
    return [v for v in values if len(v) >= MIN_SECRET_CHARS]


def _workspace_files(root: Path, max_bytes: int) -> list[tuple[str, bytes]]:
    """The workspace's files (not `.git`, not what git ignores, no symlinks), at most `max_bytes`."""
    if not root.is_dir():
        raise PortabilityError(f"the session's workspace {root} is not a folder here: export without files")
    walk = Walk(root, root, threading.Event(), ignore=ignore_rules(root, root))
    files: list[tuple[str, bytes]] = []
    total = 0
    for rel, entry in walk.files():
        total += entry.stat(follow_symlinks=False).st_size
        if total > max_bytes:
            raise PortabilityError(f"the workspace's files are over {max_bytes} bytes: export without them")
        files.append((rel, Path(entry.path).read_bytes()))
    return sorted(files)


async def export_session(
    store: Store, session_id: str, settings: Settings, *, with_files: bool = False
) -> bytes | None:
    """The session's export, or None when there is no such session."""
    bundle = await read_bundle(store.engine, session_id)
    if bundle is None:
        return None
    if with_files:
        root = Path(str(bundle.session["cwd"]))
        bundle.files = await asyncio.to_thread(_workspace_files, root, settings.snapshot_max_session_bytes)
    stamp = datetime.now(UTC).isoformat()
    return await asyncio.to_thread(encode_all, bundle, stamp, secret_values(settings))


@dataclass(frozen=True)
class Imported:
    session_id: str
    cwd: str
    events: int
    messages: int
    files: int


def parse(data: bytes) -> SessionBundle:
    try:
        return decode(data)
    except ExportFormatError as exc:
        raise PortabilityError(f"cannot import: {exc}") from None


def _file_conflicts(root: Path, files: list[tuple[str, bytes]]) -> list[str]:
    if not root.is_dir():
        raise PortabilityError(f"cannot import: {root} is not an existing folder")
    clash = []
    for rel, content in files:
        try:
            with parent_dir(root, root / rel, rel) as (dir_fd, name):
                prior = read_existing(dir_fd, name, rel)
        except FileNotFoundError:
            continue
        except (ToolError, OSError):
            clash.append(rel)
            continue
        if prior is not None and prior != content:
            clash.append(rel)
    return clash


def _write_files(root: Path, files: list[tuple[str, bytes]]) -> None:
    for rel, content in files:
        with parent_dir(root, root / rel, rel, create=True) as (dir_fd, name):
            replace_atomically(dir_fd, name, rel, content)


async def import_session(
    store: Store, bundle: SessionBundle, *, owner: str, cwd: str | None = None
) -> Imported:
    """Write a decoded export as a session of `owner`, working in `cwd` (default: the
    exported one). Workspace files in it go into that folder first (none overwritten)."""
    where = cwd or str(bundle.session["cwd"])
    if bundle.files:
        root = Path(where)
        clash = await asyncio.to_thread(_file_conflicts, root, bundle.files)
        if clash:
            shown = ", ".join(clash[:5]) + (" …" if len(clash) > 5 else "")
            raise PortabilityError(f"cannot import: files in {where} differ from the export's: {shown}")
    try:
        sid = await write_bundle(store.engine, bundle, owner=owner, cwd=where)
    except ImportConflict as exc:
        raise PortabilityError(f"cannot import: {exc}") from None
    if bundle.files:
        try:
            await asyncio.to_thread(_write_files, Path(where), bundle.files)
        except (ToolError, OSError) as exc:  # nothing half-imported: the session goes again
            await store.delete_session(sid)
            raise PortabilityError(f"cannot import: writing the workspace files failed: {exc}") from None
    return Imported(sid, where, len(bundle.events), len(bundle.messages), len(bundle.files))

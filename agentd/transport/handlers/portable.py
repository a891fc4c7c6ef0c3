"""Session export/import and the changes view (issue 33 items 1 and 2):
`_agentd/session/export|import|changes|revert_file`."""

from __future__ import annotations

import asyncio
from typing import Any

from agentd.core import limit_exceeded
from agentd.protocol import ChangesParams, ExportParams, ImportParams, RevertFileParams, RpcError
from agentd.session import (
    PortabilityError,
    RevertFile,
    export_session,
    import_session,
    parse,
    session_changes,
)
from agentd.store import FORMAT, VERSION
from agentd.transport.handlers.common import check_cwd, check_loaded_cwd, session_for
from agentd.transport.sharing import Access
from agentd.transport.state import CallContext


async def session_export(ctx: CallContext, params: ExportParams) -> dict[str, Any]:
    """The owner's session as JSONL text; a teammate's share does not reach it (its file
    snapshots and workspace are the owner's)."""
    actor = await session_for(ctx, params.session_id, Access.OWNER)
    if params.files:
        await check_loaded_cwd(ctx, actor, actor.cwd)  # its files only while the owner may work there
    await ctx.state.writer.barrier()  # everything emitted so far is in the store
    try:
        data = await export_session(ctx.state.store, actor.id, ctx.state.settings, with_files=params.files)
    except PortabilityError as exc:
        raise RpcError.invalid_params(f"Invalid params: {exc}") from None
    if data is None:
        raise RpcError.not_found(f"session {params.session_id}")
    limit = ctx.state.settings.max_frame_bytes
    if len(data) > limit:
        raise limit_exceeded(
            "export_bytes",
            limit,
            f"the export is {len(data)} bytes, over one frame: use `agentd session export`",
        )
    return {"format": FORMAT, "version": VERSION, "jsonl": data.decode("utf-8")}


async def session_import(ctx: CallContext, params: ImportParams) -> dict[str, Any]:
    """A new session of the caller's from an export; refused whole (nothing written) when
    the file is corrupt, newer, or its workspace is not the caller's to use."""
    try:
        bundle = await asyncio.to_thread(parse, params.jsonl.encode("utf-8"))
    except PortabilityError as exc:
        raise RpcError.invalid_params(f"Invalid params: jsonl: {exc}", {"kind": "import_refused"}) from None
    cwd = await check_cwd(ctx, params.cwd if params.cwd is not None else str(bundle.session["cwd"]))
    limit = ctx.state.settings.max_sessions_per_principal
    if limit and await ctx.state.store.count_sessions(ctx.principal) >= limit:
        raise limit_exceeded(
            "sessions", limit, f"session limit reached: {limit} sessions (delete some first)"
        )
    try:
        done = await import_session(ctx.state.store, bundle, owner=ctx.principal, cwd=cwd)
    except PortabilityError as exc:
        raise RpcError.invalid_params(f"Invalid params: {exc}", {"kind": "import_refused"}) from None
    return {
        "sessionId": done.session_id,
        "cwd": done.cwd,
        "events": done.events,
        "messages": done.messages,
        "files": done.files,
    }


async def session_changes_method(ctx: CallContext, params: ChangesParams) -> dict[str, Any]:
    actor = await session_for(ctx, params.session_id, Access.WATCH)
    return await session_changes(actor, params.since)


async def session_revert_file(ctx: CallContext, params: RevertFileParams) -> dict[str, Any]:
    """One file back (idle sessions only: `session_busy` while a turn runs)."""
    actor = await session_for(ctx, params.session_id, Access.DRIVE)
    reply: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
    actor.send(RevertFile(params.path, params.to_turn_id, params.force, reply))
    return await reply

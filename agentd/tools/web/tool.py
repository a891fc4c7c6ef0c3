"""The `web_fetch` tool as the model sees it (issue 33, item 4): its name, schema and
guidance, with the fetch itself (agentd/tools/web/fetch.py: httpcore, httpx and their
~100 modules, ~5 MiB) imported when the tool first runs — a session that never fetches
never loads them (issue 32 item 3: they were a third of the first turn's imports)."""

from __future__ import annotations

import asyncio
import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from agentd.tools.base import Access, ToolContext, ToolKind, ToolResult
from agentd.tools.errors import ToolError
from agentd.tools.offload import Pool, run_blocking

if TYPE_CHECKING:
    from types import ModuleType

    from agentd.tools.web.policy import WebFetchPolicy

CONVERT_DEADLINE_S = 120.0
_IMPL = "agentd.tools.web.fetch"
_impl: ModuleType | None = None


async def _fetch_module() -> ModuleType:
    """agentd/tools/web/fetch.py, imported at the first fetch in a worker thread: its ~100
    modules take a moment that the event loop (every session's) need not wait for."""
    global _impl
    if _impl is None:
        _impl = await asyncio.to_thread(importlib.import_module, _IMPL)
    return _impl


@dataclass(frozen=True)
class FetchLimits:
    max_bytes: int = 5 * 1024 * 1024
    timeout_s: float = 30.0


class WebFetch:
    name: ClassVar[str] = "web_fetch"
    kind: ClassVar[ToolKind] = ToolKind.FETCH
    access: ClassVar[Access] = Access.NETWORK
    description: ClassVar[str] = "Fetch a public web page (HTTP/HTTPS GET) and read it as markdown."
    guidance: ClassVar[str] = (
        "Use web_fetch to read documentation, issues or API references at a URL you know. "
        "HTML comes back as markdown, other text as it is; binary content is not returned. "
        "Only public addresses are reached, and the user may be asked first."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"url": {"type": "string", "description": "The http:// or https:// URL to fetch."}},
        "required": ["url"],
        "additionalProperties": False,
    }

    def __init__(self, policy: WebFetchPolicy, limits: FetchLimits | None = None) -> None:
        self.policy = policy
        self.limits = limits or FetchLimits()

    def title(self, args: dict[str, Any]) -> str:
        return f"Fetch {args.get('url', '?')}"

    def locations(self, args: dict[str, Any], ctx: ToolContext) -> list[dict[str, Any]]:
        return []

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        url = args.get("url")
        if not isinstance(url, str) or not url.strip():
            raise ToolError("url: expected an http:// or https:// URL")
        impl = await _fetch_module()
        try:
            page = await impl.fetch(url.strip(), self.policy, self.limits)
        except impl.Refused as exc:
            raise ToolError(str(exc)) from None
        if not impl.is_text(page.content_type):
            raise ToolError(f"{page.url} is {page.content_type} ({len(page.body)} bytes read): not text")
        text = await run_blocking(
            lambda _stop: impl.render(page), what="web_fetch", deadline=CONVERT_DEADLINE_S, pool=Pool.SEARCH
        )
        raw = {"url": page.url, "status": page.status, "contentType": page.content_type}
        return ToolResult(text, is_error=page.status >= 400, raw_output=raw)

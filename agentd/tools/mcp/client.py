"""MCP servers as tools (R-T9): the `mcpServers` of `session/new` / `session/load`
(stdio or streamable HTTP) are connected with the `mcp` SDK; each of their tools joins
the session's tool set as `mcp__<server>__<tool>`, with the same permission policy and
events as a built-in tool (read-only tools, by their annotation, never ask).

A stdio server is started through the session's `ShellLauncher`, so it runs under the
same sandbox as `bash` (the session's workspace writable, the rest read-only, the
server's home hidden, network per `AGENTD_SANDBOX_NETWORK`: never the host's loopback) —
unless the operator named its command in `AGENTD_MCP_UNSANDBOXED` (issue 28, item 2).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from agentd.tools.base import Access, ToolContext, ToolKind, ToolResult
from agentd.tools.errors import ToolError
from agentd.tools.files import ToolPreview
from agentd.tools.shell import SandboxMode, ShellLauncher, new_tag

if TYPE_CHECKING:  # the SDK itself is imported only when a session names an MCP server
    from mcp import ClientSession

log = logging.getLogger(__name__)

START_TIMEOUT_S = 30.0
CALL_TIMEOUT_S = 300.0


class NameValue(BaseModel):
    name: str
    value: str


class McpStdio(BaseModel):
    type: Literal["stdio"] = "stdio"
    name: str = Field(min_length=1)
    command: str = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    env: list[NameValue] = Field(default_factory=list)


class McpHttp(BaseModel):
    type: Literal["http"]
    name: str = Field(min_length=1)
    url: str = Field(min_length=1)
    headers: list[NameValue] = Field(default_factory=list)


McpServerSpec = Annotated[McpStdio | McpHttp, Field(discriminator="type")]
SPECS: TypeAdapter[list[McpServerSpec]] = TypeAdapter(list[McpServerSpec])


class McpError(Exception):
    """A server that could not be started or asked; the message names it."""


def parse_specs(raw: list[dict[str, Any]]) -> list[McpStdio | McpHttp]:
    """ACP's McpServer objects (stdio ones carry no `type`). Raises ValueError, readably."""
    items = [item if "type" in item else {**item, "type": "stdio"} for item in raw]
    try:
        specs = SPECS.validate_python(items)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"] if p not in ("stdio", "http"))
        raise ValueError(f"mcpServers.{where}: {first['msg']}") from None
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ValueError("mcpServers: names must be unique")
    return specs


def tool_name(server: str, tool: str) -> str:
    """`mcp__<server>__<tool>`, in the character set and length providers accept."""
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", f"mcp__{server}__{tool}")
    return safe[:64]


def _text(content: list[Any]) -> str:
    """What the model reads of an MCP result (tool messages are text for every provider)."""
    parts = []
    for block in content:
        kind = getattr(block, "type", "content")
        text = getattr(block, "text", None)
        if isinstance(text, str):
            parts.append(text)
        elif kind == "resource_link":
            parts.append(f"[resource link: {getattr(block, 'name', '')} <{getattr(block, 'uri', '')}>]")
        elif kind == "image":
            parts.append(f"[image: {getattr(block, 'mime_type', '')}, shown to the user]")
        else:
            parts.append(f"[{kind}]")
    return "\n".join(parts)


def _acp_blocks(content: list[Any]) -> list[dict[str, Any]]:
    """MCP content that is more than text (images, audio, resource links, embedded
    resources) as ACP tool-call content blocks, so the client shows the real thing."""
    out: list[dict[str, Any]] = []
    for block in content:
        if getattr(block, "type", None) in ("image", "audio", "resource_link", "resource"):
            dumped = block.model_dump(by_alias=True, exclude_none=True, mode="json")
            dumped.pop("annotations", None)  # MCP annotations are not ACP's
            dumped.pop("_meta", None)
            out.append({"type": "content", "content": dumped})
    return out


@dataclass
class McpTool:
    """One tool of one MCP server, shaped like a built-in tool."""

    server: str
    remote_name: str
    session: ClientSession
    name: str
    description: str
    parameters: dict[str, Any]
    access: Access
    kind: ToolKind = ToolKind.OTHER
    guidance: str = ""

    def title(self, args: dict[str, Any]) -> str:
        return f"{self.server}: {self.remote_name}"

    def locations(self, args: dict[str, Any], ctx: ToolContext) -> list[dict[str, Any]]:
        return []

    async def preview(self, args: dict[str, Any], ctx: ToolContext) -> ToolPreview:
        """Which server and tool get the arguments (the arguments are the call's rawInput)."""
        return ToolPreview(meta={"mcpServer": self.server, "mcpTool": self.remote_name, "arguments": args})

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        try:
            async with asyncio.timeout(CALL_TIMEOUT_S):
                result = await self.session.call_tool(self.remote_name, args)
        except TimeoutError:
            raise ToolError(f"MCP server {self.server!r}: {self.remote_name} timed out") from None
        except Exception as exc:  # the server died or answered nonsense: the model reads why
            raise ToolError(f"MCP server {self.server!r}: {self.remote_name} failed: {exc}") from None
        output = _text(result.content)
        if result.is_error:
            raise ToolError(output or f"{self.remote_name} failed")
        structured = getattr(result, "structured_content", None)
        return ToolResult(
            output,
            content=_acp_blocks(result.content),
            raw_output={"structured": structured} if structured is not None else None,
        )


@dataclass
class McpConnections:
    """The MCP servers of one session. The SDK's context managers must be entered and
    left by one task, so a task of its own holds them open until `close()`."""

    specs: list[McpStdio | McpHttp]
    log_dir: Path
    # How stdio servers start: sandboxed in `cwd` (the session's workspace) unless their
    # command is in `unsandboxed`. None: unconfined (an embedding without a sandbox).
    shell: ShellLauncher | None = None
    cwd: Path | None = None
    unsandboxed: frozenset[str] = frozenset()
    tools: dict[str, McpTool] = field(default_factory=dict)
    _task: asyncio.Task[None] | None = None
    _stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def start(self) -> dict[str, McpTool]:
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._run(ready), name="mcp-connections")
        try:
            async with asyncio.timeout(START_TIMEOUT_S):
                await ready
        except TimeoutError:
            await self.close()
            raise McpError(f"MCP servers did not start within {START_TIMEOUT_S:.0f}s") from None
        return self.tools

    async def close(self) -> None:
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                async with asyncio.timeout(10):
                    await self._task

    async def _run(self, ready: asyncio.Future[None]) -> None:
        current = ""
        try:
            async with contextlib.AsyncExitStack() as stack:
                for spec in self.specs:
                    current = spec.name
                    session = await self._connect(stack, spec)
                    await session.initialize()
                    listed = await session.list_tools()
                    for t in listed.tools:
                        read_only = bool(getattr(t.annotations, "read_only_hint", None))
                        tool = McpTool(
                            server=spec.name,
                            remote_name=t.name,
                            session=session,
                            name=tool_name(spec.name, t.name),
                            description=(t.description or t.name)[:1024],
                            parameters=t.input_schema or {"type": "object"},
                            access=Access.READ if read_only else Access.EXECUTE,
                            kind=ToolKind.READ if read_only else ToolKind.OTHER,
                        )
                        self.tools[tool.name] = tool
                ready.set_result(None)
                await self._stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(McpError(f"MCP server {current!r} could not start: {_reason(exc)}"))
            elif not isinstance(exc, asyncio.CancelledError):
                log.warning("MCP connections ended: %s", _reason(exc))

    async def _connect(self, stack: contextlib.AsyncExitStack, spec: McpStdio | McpHttp) -> ClientSession:
        # Imported here, not at start-up: the SDK costs about a second of imports.
        from mcp import ClientSession
        from mcp.client.stdio import stdio_client
        from mcp.client.streamable_http import streamable_http_client

        if isinstance(spec, McpStdio):
            self.log_dir.mkdir(parents=True, exist_ok=True)
            # The server's stderr goes to a file: diagnostics kept, the server's log clean.
            errlog = stack.enter_context((self.log_dir / f"mcp-{spec.name}.log").open("a"))
            params = self._stdio_params(stack, spec)
            read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
        else:
            import httpx2  # the HTTP client the mcp SDK is built on

            client = await stack.enter_async_context(
                httpx2.AsyncClient(headers={h.name: h.value for h in spec.headers}, timeout=CALL_TIMEOUT_S)
            )
            transport = streamable_http_client(spec.url, http_client=client)
            read, write, *_ = await stack.enter_async_context(transport)
        return await stack.enter_async_context(ClientSession(read, write))

    def _stdio_params(self, stack: contextlib.AsyncExitStack, spec: McpStdio) -> Any:
        from mcp import StdioServerParameters

        env = {e.name: e.value for e in spec.env}
        sandboxed = self.shell is not None and self.shell.mode is SandboxMode.BWRAP
        if not sandboxed or self.cwd is None or spec.command in self.unsandboxed:
            if sandboxed:
                log.info("MCP server %r runs outside the sandbox (AGENTD_MCP_UNSANDBOXED)", spec.name)
            return StdioServerParameters(command=spec.command, args=spec.args, env=env or None)
        assert self.shell is not None
        launch = self.shell.prepare("exec " + shlex.join([spec.command, *spec.args]), self.cwd, new_tag())
        stack.callback(launch.release)  # its egress proxy and pids cgroup, once it has ended
        return StdioServerParameters(
            command=launch.argv[0], args=launch.argv[1:], env={**launch.env, **env}, cwd=self.cwd
        )


def _reason(exc: BaseException) -> str:
    """The first real cause inside anyio's exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__

"""A small MCP server for the tests (stdio by default; `app()` for streamable HTTP)."""

from __future__ import annotations

import os
import sys
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import (
    BlobResourceContents,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
    ToolAnnotations,
)

PNG_1PX = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

server = MCPServer("calc")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def peek() -> str:
    """Report the server's CALC_GREETING environment variable (read-only)."""
    return os.environ.get("CALC_GREETING", "no greeting")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def picture() -> list[Any]:
    """A tiny PNG and a link to where it came from."""
    return [
        ImageContent(type="image", data=PNG_1PX, mime_type="image/png"),
        ResourceLink(type="resource_link", name="source", uri="file:///tmp/pixel.png", mime_type="image/png"),
        TextContent(type="text", text="one pixel"),
    ]


NOTES_URI = "file:///project/NOTES.md"
NOTES_TEXT = "# Notes\nThe deploy key rotates on Fridays."
CHART_URI = "memory://chart.png"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def resources() -> list[Any]:
    """An embedded text resource, an embedded image, an embedded binary, a described link."""
    return [
        TextContent(type="text", text="three resources"),
        EmbeddedResource(
            type="resource",
            resource=TextResourceContents(uri=NOTES_URI, mime_type="text/markdown", text=NOTES_TEXT),
        ),
        EmbeddedResource(
            type="resource", resource=BlobResourceContents(uri=CHART_URI, mime_type="image/png", blob=PNG_1PX)
        ),
        EmbeddedResource(
            type="resource",
            resource=BlobResourceContents(
                uri="memory://data.bin", mime_type="application/octet-stream", blob="AAAA"
            ),
        ),
        ResourceLink(
            type="resource_link", name="spec", uri="https://example.com/spec", description="The spec."
        ),
    ]


@server.tool()
def boom() -> str:
    """Always fails."""
    raise ValueError("it broke")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--crash":
        sys.exit("calc: refusing to start")
    if len(sys.argv) > 1 and sys.argv[1] == "--hang":  # never answers; ends when stdin closes
        if len(sys.argv) > 2:  # says it is up: its pid, in the file named
            with open(sys.argv[2], "w") as out:
                out.write(str(os.getpid()))
        sys.stdin.read()
        sys.exit(0)
    if len(sys.argv) > 2 and sys.argv[1] == "--slow-start":  # (bench/mcp_start.py) then serves
        import time

        time.sleep(float(sys.argv[2]))
        sys.argv[1:] = []
    if len(sys.argv) > 3 and sys.argv[1] == "--rendezvous":
        # Opening a FIFO blocks until its other end is opened: this server answers only
        # once its peer (the FIFO's other end) has been started too.
        with open(sys.argv[2], "w" if sys.argv[3] == "writer" else "r"):
            pass
        sys.argv[1:] = []
    if len(sys.argv) > 2 and sys.argv[1] == "--http":  # streamable HTTP on 127.0.0.1:PORT/mcp
        import uvicorn

        uvicorn.run(
            server.streamable_http_app(), host="127.0.0.1", port=int(sys.argv[2]), log_level="warning"
        )
    else:
        server.run()

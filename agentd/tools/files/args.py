"""Argument helpers shared by the file tools. The loop validates arguments against each
tool's schema; these keep the tools safe when called directly and give readable errors
instead of TypeErrors."""

from __future__ import annotations

from typing import Any

from agentd.tools.base import ToolContext
from agentd.tools.errors import ToolError
from agentd.tools.files.workspace import resolve_in_workspace


def str_arg(args: dict[str, Any], key: str, *, default: str | None = None, allow_empty: bool = True) -> str:
    value = args.get(key, default)
    if value is None:
        raise ToolError(f"missing required argument {key!r}")
    if not isinstance(value, str):
        raise ToolError(f"argument {key!r} must be a string, got {type(value).__name__}")
    if not allow_empty and not value:
        raise ToolError(f"argument {key!r} must not be empty")
    return value


def opt_int_arg(args: dict[str, Any], key: str, *, minimum: int = 1) -> int | None:
    value = args.get(key)
    if value is None:
        return None
    # bool is an int subclass; `true` as a line number is a model mistake, not 1.
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolError(f"argument {key!r} must be an integer, got {value!r}")
    if value < minimum:
        raise ToolError(f"argument {key!r} must be >= {minimum}, got {value}")
    return value


def safe_locations(args: dict[str, Any], ctx: ToolContext, line: int | None = None) -> list[dict[str, Any]]:
    """Locations for the pending tool_call event; a bad path yields none (run() reports it)."""
    try:
        path = resolve_in_workspace(ctx.cwd, str_arg(args, "path", default="."))
    except ToolError:
        return []
    loc: dict[str, Any] = {"path": str(path)}
    if line is not None:
        loc["line"] = line
    return [loc]


def os_error(action: str, disp: str, exc: OSError) -> ToolError:
    return ToolError(f"cannot {action} {disp}: {exc.strerror or exc}")

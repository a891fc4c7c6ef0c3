"""The session's todo list and the `todo_write` tool (R-L3f).

`todo_write` always sends the complete list, which replaces the previous one; the result
carries the list as an ACP plan (`ToolResult.plan`) for a `plan` session update. The loop's
TodoGate reads `TodoList.unfinished()` to nudge a model that stops with work left.
"""

from __future__ import annotations

from typing import Any, ClassVar

from agentd.tools.base import Access, ToolContext, ToolKind, ToolResult
from agentd.tools.errors import ToolError

STATUSES = ("pending", "in_progress", "completed")
PRIORITIES = ("high", "medium", "low")
DEFAULT_PRIORITY = "medium"  # ACP PlanEntry requires a priority
MAX_ITEMS = 100
MAX_CONTENT_CHARS = 2000


def _validate(entries: Any) -> list[dict[str, str]]:
    """Checked copies of `entries`; raises ValueError naming the first bad item."""
    if not isinstance(entries, list):
        raise ValueError(f"todos must be a list, got {type(entries).__name__}")
    if len(entries) > MAX_ITEMS:
        raise ValueError(f"too many todos ({len(entries)}); keep the list under {MAX_ITEMS} items")
    out: list[dict[str, str]] = []
    for i, item in enumerate(entries, 1):
        if not isinstance(item, dict):
            raise ValueError(f"todo #{i} must be an object with content and status")
        extra = set(item) - {"content", "status", "priority"}
        if extra:
            raise ValueError(f"todo #{i} has unknown field(s): {', '.join(sorted(extra))}")
        content = item.get("content")
        if not isinstance(content, str) or not content.strip():
            raise ValueError(f"todo #{i}: content must be a non-empty string")
        if len(content) > MAX_CONTENT_CHARS:
            raise ValueError(f"todo #{i}: content is longer than {MAX_CONTENT_CHARS} characters")
        status = item.get("status")
        if status not in STATUSES:
            raise ValueError(f"todo #{i}: status must be one of {', '.join(STATUSES)}, got {status!r}")
        entry = {"content": content.strip(), "status": status}
        priority = item.get("priority")
        if priority is not None:
            if priority not in PRIORITIES:
                raise ValueError(
                    f"todo #{i}: priority must be one of {', '.join(PRIORITIES)}, got {priority!r}"
                )
            entry["priority"] = priority
        out.append(entry)
    return out


class TodoList:
    """The session's plan: `{content, status, priority?}` entries, replaced as a whole."""

    def __init__(self, entries: list[dict[str, Any]] | None = None) -> None:
        self._entries: list[dict[str, str]] = _validate(entries) if entries else []

    @property
    def entries(self) -> list[dict[str, str]]:
        return [dict(e) for e in self._entries]

    def replace(self, entries: list[dict[str, Any]]) -> None:
        """Replace the whole list; a bad entry raises ValueError and changes nothing."""
        self._entries = _validate(entries)

    def unfinished(self) -> list[dict[str, str]]:
        """Entries still `pending` or `in_progress` (what TodoGate nudges about)."""
        if not self._entries:
            return []  # asked every step; most sessions keep no list
        return [dict(e) for e in self._entries if e["status"] != "completed"]

    def as_plan(self) -> list[dict[str, str]]:
        """ACP PlanEntry list: `{content, priority, status}`, priority defaulting to medium."""
        return [
            {"content": e["content"], "priority": e.get("priority", DEFAULT_PRIORITY), "status": e["status"]}
            for e in self._entries
        ]

    def __len__(self) -> int:
        return len(self._entries)


class TodoWrite:
    name: ClassVar[str] = "todo_write"
    kind: ClassVar[ToolKind] = ToolKind.THINK
    access: ClassVar[Access] = Access.READ
    description: ClassVar[str] = (
        "Replace the session's todo list (the plan shown to the user) with a new list."
    )
    guidance: ClassVar[str] = (
        "Use todo_write for work with several steps: send the complete list every time (it replaces the "
        "previous one), with each item's status pending, in_progress or completed and optionally a "
        "priority (high, medium or low). Keep the plan complete and current: mark an item in_progress "
        "when you start it (usually one at a time) and completed as soon as it is done, and add items "
        "you discover along the way. Do not finish your turn with items still pending or in_progress "
        "unless you say why; skip the list for trivial one-step requests."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "todos": {
                "type": "array",
                "maxItems": MAX_ITEMS,
                "description": "The complete todo list, in order.",
                "items": {
                    "type": "object",
                    "properties": {
                        "content": {"type": "string", "minLength": 1, "description": "What to do."},
                        "status": {"type": "string", "enum": list(STATUSES)},
                        "priority": {"type": "string", "enum": list(PRIORITIES)},
                    },
                    "required": ["content", "status"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["todos"],
        "additionalProperties": False,
    }

    def title(self, args: dict[str, Any]) -> str:
        todos = args.get("todos")
        if isinstance(todos, list):
            return f"Update todo list ({len(todos)} item{'' if len(todos) == 1 else 's'})"
        return "Update todo list"

    def locations(self, args: dict[str, Any], ctx: ToolContext) -> list[dict[str, Any]]:
        return []

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        if ctx.todos is None:
            raise ToolError("this session has no todo list; todo_write is not available here")
        if "todos" not in args:
            raise ToolError("missing required argument 'todos'")
        try:
            ctx.todos.replace(args["todos"])
        except ValueError as exc:
            raise ToolError(f"{exc}; the todo list was not changed") from None
        plan = ctx.todos.as_plan()
        counts = {s: sum(1 for e in plan if e["status"] == s) for s in STATUSES}
        if not plan:
            output = "Cleared the todo list."
        else:
            output = (
                f"Updated the todo list: {len(plan)} item{'' if len(plan) == 1 else 's'} — "
                f"{counts['completed']} completed, {counts['in_progress']} in progress, "
                f"{counts['pending']} pending."
            )
            if counts["completed"] == len(plan):
                output += " All items are done."
        return ToolResult(
            output=output,
            raw_output={"total": len(plan), **{k: v for k, v in counts.items()}},
            plan=plan,
        )

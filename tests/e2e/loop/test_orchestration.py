"""Tool orchestration for one model step (R-T1, R-T2, R-T3), over a real WebSocket.

- phase 2 runs approved calls concurrently: three read calls of one step overlap in time;
- writes to the same path are serialised by a per-path lock while a write to another path
  runs alongside them;
- results are written back in the original call order whatever order they finished in;
- a tool that raises becomes a failed tool call with the error text and the loop goes on;
- a permission rejection mid-step is a circuit breaker: later calls are cancelled with a
  readable result, earlier approved ones still run, the turn ends `cancelled`;
- a pre-tool hook denial skips only that call; a hook that fails or times out fails open.

Concurrency is shown with the tools' own `time.monotonic()` spans, never with timing
asserts: each probe waits (bounded) on asyncio events set by the others, so the order of
things is forced by events and a serial implementation would time out the bounded wait.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from agentd.core.conversation import Message
from agentd.infra.config import PermissionMode
from agentd.tools.base import Access, ToolContext, ToolKind, ToolResult
from agentd.tools.errors import ToolError
from agentd.tools.registry import builtin_tools
from tests.support.client import RequestHandler, WsClient, text_prompt
from tests.support.server import scripted
from tests.support.session import (
    assert_valid_frames,
    events,
    new_session,
    served_session,
    shown_text,
    tool_call,
)

# A bound on how long a probe waits for another one: only reached when the server runs
# calls serially that it should run concurrently (the test then fails, it does not hang).
WAIT_BOUND_S = 10.0

# ---------------------------------------------------------------------------- probe tools


@dataclass
class Span:
    label: str
    start: float
    end: float
    waited_out: tuple[str, ...]  # labels whose event never came within the bound

    def overlaps(self, other: Span) -> bool:
        return self.start < other.end and other.start < self.end


class Probe:
    """A test tool recording when each call ran (its own `time.monotonic()` readings).

    Arguments: `label` (required, unique per call), `path` (reported as the call's
    location, which is what write locks key on), `after_start` / `after_end` (labels of
    other calls to wait for, bounded, before finishing), `fail` ("raise" or "tool_error")
    with `message`.
    """

    name: ClassVar[str] = "probe"
    kind: ClassVar[ToolKind] = ToolKind.OTHER
    access: ClassVar[Access] = Access.READ
    description: ClassVar[str] = "Test probe: records when it runs."
    guidance: ClassVar[str] = "Only for tests."
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "label": {"type": "string"},
            "path": {"type": "string"},
            "after_start": {"type": "array", "items": {"type": "string"}},
            "after_end": {"type": "array", "items": {"type": "string"}},
            "fail": {"enum": ["raise", "tool_error"]},
            "message": {"type": "string"},
        },
        "required": ["label"],
        "additionalProperties": False,
    }

    def __init__(self) -> None:
        self.spans: dict[str, Span] = {}
        self.started: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)
        self.ended: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)

    def title(self, args: dict[str, Any]) -> str:
        return f"Probe {args.get('label')}"

    def locations(self, args: dict[str, Any], ctx: ToolContext) -> list[dict[str, Any]]:
        return [{"path": str(ctx.cwd / args["path"])}] if "path" in args else []

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        label = args["label"]
        start = time.monotonic()
        self.started[label].set()
        waited_out: list[str] = []
        try:
            waits = [(o, self.started[o]) for o in args.get("after_start", [])]
            waits += [(o, self.ended[o]) for o in args.get("after_end", [])]
            for other, event in waits:
                try:
                    await asyncio.wait_for(event.wait(), WAIT_BOUND_S)
                except TimeoutError:
                    waited_out.append(other)
            if args.get("fail") == "raise":
                raise RuntimeError(args.get("message", "boom"))
            if args.get("fail") == "tool_error":
                raise ToolError(args.get("message", "readable failure"))
        finally:
            self.spans[label] = Span(label, start, time.monotonic(), tuple(waited_out))
            self.ended[label].set()
        return ToolResult(f"probe {label} done")


class WriteProbe(Probe):
    """The same probe with WRITE access: its calls take the per-path locks."""

    name: ClassVar[str] = "write_probe"
    kind: ClassVar[ToolKind] = ToolKind.EDIT
    access: ClassVar[Access] = Access.WRITE


# ---------------------------------------------------------------------------- helpers


def final_tool_updates(client: WsClient, session_id: str) -> dict[str, dict[str, Any]]:
    """The completed/failed tool_call_update per call id, in the order they were sent."""
    out: dict[str, dict[str, Any]] = {}
    for u in client.updates(session_id):
        if u["sessionUpdate"] == "tool_call_update" and u.get("status") in ("completed", "failed"):
            out[u["toolCallId"]] = u
    return out


def tool_messages(messages: list[Message]) -> list[Message]:
    return [m for m in messages if m.role == "tool"]


def asked(client: WsClient) -> list[str]:
    assert all(r["method"] == "session/request_permission" for r in client.server_requests)
    return [r["params"]["toolCall"]["toolCallId"] for r in client.server_requests]


def answer_by_call(answers: dict[str, str]) -> RequestHandler:
    async def handler(msg: dict[str, Any]) -> dict[str, Any]:
        option = answers[msg["params"]["toolCall"]["toolCallId"]]
        return {"outcome": {"outcome": "selected", "optionId": option}}

    return handler


def write_hooks_file(tmp_path: Path, hook_source: str, *, timeout: float | None = None) -> Path:
    """A hooks TOML file with one pre-tool command hook running `hook_source` with Python."""
    script = tmp_path / "hook.py"
    script.write_text(hook_source)
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"
    lines = ["[[pre_tool]]", f"command = {json.dumps(command)}"]
    if timeout is not None:
        lines.append(f"timeout = {timeout}")
    path = tmp_path / "hooks.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


# ---------------------------------------------------------------------------- R-T1 parallel phase


async def test_read_calls_of_one_step_run_concurrently(server_factory, workspace: Path):
    probe = Probe()
    labels = ["p1", "p2", "p3"]
    provider = scripted(
        {
            "text": "Probing three times at once.",
            "tool_calls": [
                tool_call(
                    "probe", f"call_{label}", label=label, after_start=[o for o in labels if o != label]
                )
                for label in labels
            ],
        },
        {"text": "All three probes ran."},
    )
    async with served_session(
        server_factory, workspace, provider, tools={**builtin_tools(), "probe": probe}
    ) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "probe"))

        assert result["stopReason"] == "end_turn"
        assert set(probe.spans) == set(labels)
        # Each call waited until the other two had started: nobody waited in vain ...
        assert all(span.waited_out == () for span in probe.spans.values()), probe.spans
        # ... so every pair overlaps: each call started before each other one ended.
        for a in labels:
            for b in labels:
                if a != b:
                    assert probe.spans[a].start < probe.spans[b].end, (a, b, probe.spans)
        finals = final_tool_updates(client, sid)
        assert [finals[f"call_{label}"]["status"] for label in labels] == ["completed"] * 3
        assert events(client, sid, "turn_ended")[0]["toolsCalled"] == 3
        assert_valid_frames(client)


# ---------------------------------------------------------------------------- R-T2 per-path locks


async def test_writes_to_the_same_path_are_serialised_while_another_path_runs_alongside(
    server_factory, workspace: Path
):
    probe = WriteProbe()
    provider = scripted(
        {
            "tool_calls": [
                # Both same-path writes hold until the other-path write started; that one
                # holds until both same-path writes started. Only a per-path lock (and
                # parallel execution otherwise) lets all three finish without timing out.
                tool_call("write_probe", "call_same1", label="same1", path="same.txt", after_start=["other"]),
                tool_call("write_probe", "call_same2", label="same2", path="same.txt", after_start=["other"]),
                tool_call(
                    "write_probe",
                    "call_other",
                    label="other",
                    path="other.txt",
                    after_start=["same1", "same2"],
                ),
            ]
        },
        {"text": "Written."},
    )
    async with served_session(
        server_factory,
        workspace,
        provider,
        tools={**builtin_tools(), "write_probe": probe},
        permission_mode=PermissionMode.BYPASS,
    ) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "write"))

        assert result["stopReason"] == "end_turn"
        spans = probe.spans
        assert set(spans) == {"same1", "same2", "other"}
        assert all(span.waited_out == () for span in spans.values()), spans
        # The two writes to same.txt never overlap: the later one started after the earlier ended.
        first, second = sorted([spans["same1"], spans["same2"]], key=lambda s: s.start)
        assert second.start >= first.end, spans
        assert not first.overlaps(second)
        # The write to other.txt overlaps both of them.
        assert spans["other"].overlaps(first), spans
        assert spans["other"].overlaps(second), spans
        # The lock keys on the path the tool reports as its location.
        announced = [u for u in client.updates(sid) if u["sessionUpdate"] == "tool_call"]
        assert [u["locations"] for u in announced] == [
            [{"path": str(workspace / "same.txt")}],
            [{"path": str(workspace / "same.txt")}],
            [{"path": str(workspace / "other.txt")}],
        ]
        assert_valid_frames(client)


# ---------------------------------------------------------------------------- R-T1 write-back order


async def test_results_are_written_back_in_call_order_when_the_first_call_finishes_last(
    server_factory, workspace: Path
):
    probe = Probe()
    provider = scripted(
        {
            "tool_calls": [
                tool_call("probe", "call_slow", label="slow", after_end=["fast1", "fast2"]),
                tool_call("probe", "call_fast1", label="fast1"),
                tool_call("probe", "call_fast2", label="fast2"),
            ]
        },
        {"text": "Got all three."},
    )
    async with served_session(
        server_factory, workspace, provider, tools={**builtin_tools(), "probe": probe}
    ) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "probe"))

        assert result["stopReason"] == "end_turn"
        spans = probe.spans
        assert spans["slow"].waited_out == ()
        # The first call really finished last ...
        assert spans["slow"].end >= spans["fast1"].end
        assert spans["slow"].end >= spans["fast2"].end
        # ... yet the model reads the results in the order it made the calls,
        results = tool_messages(provider.requests[-1].messages)
        assert [(m.tool_call_id, m.content) for m in results] == [
            ("call_slow", "probe slow done"),
            ("call_fast1", "probe fast1 done"),
            ("call_fast2", "probe fast2 done"),
        ]
        # and clients get the final updates in that order too.
        assert list(final_tool_updates(client, sid)) == ["call_slow", "call_fast1", "call_fast2"]
        assert_valid_frames(client)


# ---------------------------------------------------------------------------- R-T3 self-healing


async def test_a_tool_that_raises_becomes_a_failed_call_and_the_loop_goes_on(server_factory, workspace: Path):
    probe = Probe()
    provider = scripted(
        {
            "tool_calls": [
                tool_call("probe", "call_crash", label="crash", fail="raise", message="disk on fire"),
                tool_call(
                    "probe", "call_readable", label="readable", fail="tool_error", message="no such widget"
                ),
                tool_call("probe", "call_fine", label="fine"),
            ]
        },
        {"text": "One crashed, one failed, one worked; carrying on."},
    )
    async with served_session(
        server_factory, workspace, provider, tools={**builtin_tools(), "probe": probe}
    ) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "probe"))

        # The loop went on to the model's next step and the turn ended normally.
        assert result["stopReason"] == "end_turn"
        assert len(provider.requests) == 2
        finals = final_tool_updates(client, sid)
        assert finals["call_crash"]["status"] == "failed"
        assert "RuntimeError: disk on fire" in shown_text(finals["call_crash"])
        assert finals["call_readable"]["status"] == "failed"
        assert shown_text(finals["call_readable"]) == "no such widget"
        assert finals["call_fine"]["status"] == "completed"
        # The model read the error texts as tool results.
        results = {m.tool_call_id: m for m in tool_messages(provider.requests[1].messages)}
        assert results["call_crash"].is_error
        assert "RuntimeError: disk on fire" in results["call_crash"].content
        assert results["call_readable"].is_error
        assert results["call_readable"].content == "no such widget"
        assert not results["call_fine"].is_error
        ended = events(client, sid, "turn_ended")
        assert [(e["outcome"], e["stopReason"]) for e in ended] == [("completed", "end_turn")]
        assert_valid_frames(client)


# ---------------------------------------------------------------------------- R-T1 circuit breaker


async def test_a_rejection_mid_step_cancels_later_calls_and_ends_the_turn(server_factory, workspace: Path):
    provider = scripted(
        {
            "tool_calls": [
                tool_call("write_file", "call_a", path="a.txt", content="a"),
                tool_call("write_file", "call_b", path="b.txt", content="b"),
                tool_call("write_file", "call_c", path="c.txt", content="c"),
            ]
        },
        {"text": "should not be sampled in this turn"},
    )
    async with server_factory(provider, permission_mode=PermissionMode.DEFAULT) as server:
        client = await server.client()
        client.on_request = answer_by_call({"call_a": "allow_once", "call_b": "reject_once"})
        sid = await new_session(client, workspace)

        result = await client.call("session/prompt", text_prompt(sid, "write a, b and c"))

        assert result["stopReason"] == "cancelled"
        assert result["_meta"]["agentd"]["reason"] == "permission_rejected"
        ended = events(client, sid, "turn_ended")
        assert [(e["outcome"], e["stopReason"], e["reason"]) for e in ended] == [
            ("cancelled", "cancelled", "permission_rejected")
        ]
        assert asked(client) == ["call_a", "call_b"]  # serial approval stopped at b
        # The call approved before the rejection still ran; the others did not.
        assert (workspace / "a.txt").read_text() == "a"
        assert not (workspace / "b.txt").exists()
        assert not (workspace / "c.txt").exists()
        finals = final_tool_updates(client, sid)
        assert [finals[c]["status"] for c in ("call_a", "call_b", "call_c")] == [
            "completed",
            "failed",
            "failed",
        ]
        assert "rejected by the user" in shown_text(finals["call_b"])
        assert "cancelled because an earlier tool call in this step was rejected" in shown_text(
            finals["call_c"]
        )
        assert ended[0]["toolsCalled"] == 1
        assert len(provider.requests) == 1
        assert_valid_frames(client)
        await client.close()


# ---------------------------------------------------------------------------- pre-tool hooks

DENY_B_HOOK = """\
import json, sys
payload = json.load(sys.stdin)
with open(sys.argv[0] + ".log", "a") as log:
    log.write(payload["tool"] + " " + str(payload["input"].get("path")) + "\\n")
if payload["input"].get("path") == "b.txt":
    print(json.dumps({"decision": "deny", "reason": "no touching b"}))
else:
    print(json.dumps({"decision": "allow"}))
"""


async def test_a_hook_denial_skips_only_that_call(server_factory, workspace: Path, tmp_path: Path):
    hooks = write_hooks_file(tmp_path, DENY_B_HOOK)
    provider = scripted(
        {
            "tool_calls": [
                tool_call("write_file", "call_a", path="a.txt", content="a"),
                tool_call("write_file", "call_b", path="b.txt", content="b"),
                tool_call("write_file", "call_c", path="c.txt", content="c"),
            ]
        },
        {"text": "b was blocked; a and c are written."},
    )
    async with served_session(
        server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS, hooks_file=hooks
    ) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "write a, b and c"))

        # The turn went on to the model's next step and ended normally.
        assert result["stopReason"] == "end_turn"
        assert len(provider.requests) == 2
        # The hook saw every call, in order (serial approval).
        assert (tmp_path / "hook.py.log").read_text().splitlines() == [
            "write_file a.txt",
            "write_file b.txt",
            "write_file c.txt",
        ]
        assert (workspace / "a.txt").read_text() == "a"
        assert not (workspace / "b.txt").exists()
        assert (workspace / "c.txt").read_text() == "c"
        finals = final_tool_updates(client, sid)
        assert [finals[c]["status"] for c in ("call_a", "call_b", "call_c")] == [
            "completed",
            "failed",
            "completed",
        ]
        assert shown_text(finals["call_b"]) == "Blocked by a hook: no touching b"
        results = tool_messages(provider.requests[1].messages)
        assert [(m.tool_call_id, m.is_error) for m in results] == [
            ("call_a", False),
            ("call_b", True),
            ("call_c", False),
        ]
        assert results[1].content == "Blocked by a hook: no touching b"
        ended = events(client, sid, "turn_ended")
        assert [(e["outcome"], e["stopReason"], e["toolsCalled"]) for e in ended] == [
            ("completed", "end_turn", 2)
        ]
        assert_valid_frames(client)


FAILING_HOOK = """\
import json, sys
sys.stdin.read()
open(sys.argv[0] + ".ran", "w").write("ran\\n")
print(json.dumps({"decision": "deny", "reason": "a broken hook must not count"}))
sys.stderr.write("hook crashed\\n")
sys.exit(3)
"""

SLOW_HOOK = """\
import json, sys, time
sys.stdin.read()
open(sys.argv[0] + ".ran", "w").write("ran\\n")
sys.stdout.flush()
time.sleep(60)
print(json.dumps({"decision": "deny", "reason": "too late to count"}))
"""


@pytest.mark.parametrize(
    ("hook_source", "hook_timeout"),
    [(FAILING_HOOK, None), (SLOW_HOOK, 0.5)],
    ids=["non_zero_exit", "timeout"],
)
async def test_a_failing_or_slow_hook_fails_open(
    server_factory, workspace: Path, tmp_path: Path, hook_source: str, hook_timeout: float | None
):
    hooks = write_hooks_file(tmp_path, hook_source, timeout=hook_timeout)
    provider = scripted(
        {"tool_calls": [tool_call("write_file", "call_a", path="a.txt", content="a")]},
        {"text": "Written."},
    )
    async with served_session(
        server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS, hooks_file=hooks
    ) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "write a"))

        assert result["stopReason"] == "end_turn"
        assert (tmp_path / "hook.py.ran").exists()  # the hook really was consulted
        assert (workspace / "a.txt").read_text() == "a"  # ... and the call ran anyway
        assert final_tool_updates(client, sid)["call_a"]["status"] == "completed"
        assert len(provider.requests) == 2
        assert_valid_frames(client)

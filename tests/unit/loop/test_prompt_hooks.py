"""user_prompt_submit hooks (issue 30 item 7): the verdict merge and the answers' parsing,
without a server; a real command hook through `CommandHook`."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agentd.loop.prompt_hooks import blocked_text, context_reminder, merge_prompt_verdicts
from agentd.loop.turn_reminders import ReminderKind
from agentd.tools.hooks import (
    PROMPT_DECISIONS,
    CommandHook,
    HookDecision,
    HookVerdict,
    load_hooks,
    parse_verdict,
)

ALLOW = HookVerdict(HookDecision.ALLOW, hook="a")
CONTEXT1 = HookVerdict(HookDecision.ALLOW, context="branch: main", hook="c1")
CONTEXT2 = HookVerdict(HookDecision.ALLOW, context="ticket: ABC-1", hook="c2")
BLOCK1 = HookVerdict(HookDecision.BLOCK, "contains a secret", hook="b1")
BLOCK_BARE = HookVerdict(HookDecision.BLOCK, hook="b2")


@pytest.mark.parametrize(
    ("verdicts", "expected"),
    [
        ([], HookVerdict(HookDecision.ALLOW, hook="merged")),
        ([ALLOW], HookVerdict(HookDecision.ALLOW, hook="merged")),
        (
            [CONTEXT1, ALLOW, CONTEXT2],
            HookVerdict(HookDecision.ALLOW, context="branch: main\nticket: ABC-1", hook="merged"),
        ),
        ([CONTEXT1, BLOCK1, BLOCK_BARE], HookVerdict(HookDecision.BLOCK, "contains a secret", hook="merged")),
        ([BLOCK_BARE], HookVerdict(HookDecision.BLOCK, "blocked by a hook", hook="merged")),
    ],
    ids=["none", "allow", "contexts join in order", "any block wins", "bare block"],
)
def test_merge_prompt_verdicts(verdicts: list[HookVerdict], expected: HookVerdict) -> None:
    assert merge_prompt_verdicts(verdicts) == expected


def test_context_becomes_a_reminder_and_a_block_a_line_for_the_user() -> None:
    reminder = context_reminder(merge_prompt_verdicts([CONTEXT1]))
    assert reminder is not None and reminder.kind is ReminderKind.PROMPT_HOOK
    assert reminder.render() == "<system-reminder>\nbranch: main\n</system-reminder>"
    assert context_reminder(merge_prompt_verdicts([ALLOW])) is None
    assert context_reminder(merge_prompt_verdicts([CONTEXT1, BLOCK1])) is None
    assert blocked_text(BLOCK1) == "A user_prompt_submit hook blocked this prompt: contains a secret"


@pytest.mark.parametrize(
    ("answer", "decision", "failed_open"),
    [
        ({}, HookDecision.ALLOW, False),
        ({"decision": "block", "reason": "no"}, HookDecision.BLOCK, False),
        ({"decision": "deny", "reason": "no"}, HookDecision.BLOCK, False),
        ({"decision": "prevent"}, HookDecision.ALLOW, True),  # a stop-hook answer: not for prompts
        ({"decision": "maybe"}, HookDecision.ALLOW, True),
    ],
)
def test_prompt_answers(answer: dict[str, str], decision: HookDecision, failed_open: bool) -> None:
    verdict = parse_verdict(answer, "h", PROMPT_DECISIONS)
    assert (verdict.decision, verdict.failed_open) == (decision, failed_open)


def test_the_hooks_file_has_a_user_prompt_submit_section(tmp_path: Path) -> None:
    path = tmp_path / "hooks.toml"
    path.write_text('[[user_prompt_submit]]\ncommand = "a"\ntimeout = 2\n')
    hooks = load_hooks(path)
    assert [(h.command, h.timeout) for h in hooks.user_prompt_submit] == [("a", 2.0)]
    assert hooks.stop == []


async def test_a_command_hook_reads_the_prompt_and_answers(tmp_path: Path) -> None:
    script = tmp_path / "hook.py"
    script.write_text(
        "import json, sys\n"
        "p = json.load(sys.stdin)\n"
        "ok = p['event'] == 'user_prompt_submit' and 'secret' not in p['prompt']\n"
        "print(json.dumps({'decision': 'allow', 'context': 'seen: ' + p['prompt']} if ok else "
        "{'decision': 'block', 'reason': 'a secret'}))\n"
    )
    hook = CommandHook(f"{sys.executable} {script}")
    payload = {"event": "user_prompt_submit", "cwd": str(tmp_path), "prompt": "hello"}
    allowed = await hook.user_prompt_submit(payload)
    assert (allowed.decision, allowed.context) == (HookDecision.ALLOW, "seen: hello")
    blocked = await hook.user_prompt_submit({**payload, "prompt": "my secret"})
    assert (blocked.decision, blocked.reason) == (HookDecision.BLOCK, "a secret")
    broken = await CommandHook("exit 3").user_prompt_submit(payload)
    assert broken.decision is HookDecision.ALLOW and broken.failed_open

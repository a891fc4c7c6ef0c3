"""The stop-hook verdict merge (R-L2d), table-driven: prevent beats block beats allow."""

from __future__ import annotations

import pytest

from agentd.loop.stop_hooks import keep_working_text, merge_stop_verdicts
from agentd.tools.hooks import HookDecision, HookVerdict

ALLOW = HookVerdict(HookDecision.ALLOW, hook="a")
PREVENT = HookVerdict(HookDecision.PREVENT, "stop now", hook="p")
PREVENT2 = HookVerdict(HookDecision.PREVENT, "second", hook="p2")
BLOCK1 = HookVerdict(HookDecision.BLOCK, "tests fail", "see log", hook="b1")
BLOCK2 = HookVerdict(HookDecision.BLOCK, "lint", None, hook="b2")
BLOCK_BARE = HookVerdict(HookDecision.BLOCK, hook="b3")


@pytest.mark.parametrize(
    ("verdicts", "expected"),
    [
        ([], HookVerdict(HookDecision.ALLOW, hook="merged")),
        ([ALLOW], HookVerdict(HookDecision.ALLOW, hook="merged")),
        ([BLOCK1, PREVENT, PREVENT2], PREVENT),
        (
            [BLOCK1, ALLOW, BLOCK2],
            HookVerdict(HookDecision.BLOCK, "tests fail; lint", "see log", hook="merged"),
        ),
        ([BLOCK_BARE], HookVerdict(HookDecision.BLOCK, None, None, hook="merged")),
    ],
    ids=["none", "allow", "first prevent wins", "blocks merge", "bare block"],
)
def test_merge_stop_verdicts(verdicts: list[HookVerdict], expected: HookVerdict) -> None:
    assert merge_stop_verdicts(verdicts) == expected


@pytest.mark.parametrize(
    ("verdict", "text"),
    [
        (BLOCK1, "[stop hook] Keep working: tests fail\nsee log"),
        (BLOCK_BARE, "[stop hook] Keep working: the task is not finished"),
    ],
)
def test_keep_working_text(verdict: HookVerdict, text: str) -> None:
    assert keep_working_text(verdict) == text

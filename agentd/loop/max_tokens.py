"""Output-limit handling (R-L3g), as a pure decision over what the cut-off step held.

A response cut by the output limit *with* content is continued where it stopped; an
*empty* one (no text and no tool calls — e.g. all reasoning) is nudged and retried. Both
are bounded; an empty response that stays empty ends the turn with a readable error,
never a silent empty success.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


@dataclass(frozen=True)
class MaxTokensLimits:
    max_continuations: int = 2
    max_empty_retries: int = 2


DEFAULT_LIMITS = MaxTokensLimits()

CONTINUE_TEXT = "Your last message was cut off by the output limit. Continue exactly where you stopped."
EMPTY_NUDGE_TEXT = (
    "Your last response used the whole output limit without producing any answer or tool call. "
    "Answer now, briefly and directly; do not spend the output on private reasoning."
)
EMPTY_FAILURE_TEXT = (
    "The model used its whole output limit {n} times in a row without producing an answer. "
    "Raise the model's output limit or ask for something smaller."
)


class MaxTokensAction(StrEnum):
    CONTINUE = "continue"  # append CONTINUE_TEXT and sample again
    NUDGE = "nudge"  # append EMPTY_NUDGE_TEXT and sample again
    ACCEPT = "accept"  # content-bearing, continuations used up: complete with max_tokens
    FAIL = "fail"  # empty, retries used up: a terminal, readable error


def on_max_tokens(
    *, has_content: bool, continuations: int, empty_retries: int, limits: MaxTokensLimits = DEFAULT_LIMITS
) -> MaxTokensAction:
    if has_content:
        return (
            MaxTokensAction.CONTINUE if continuations < limits.max_continuations else MaxTokensAction.ACCEPT
        )
    return MaxTokensAction.NUDGE if empty_retries < limits.max_empty_retries else MaxTokensAction.FAIL

from agentd.core import GoalRound, TurnSummary, compaction_record


def test_an_empty_summary_holds_only_iterations_and_usage() -> None:
    assert TurnSummary(iterations=2, usage={"calls": 1}).wire() == {"iterations": 2, "usage": {"calls": 1}}


def test_the_summary_spells_each_field_in_the_stored_order() -> None:
    summary = TurnSummary(
        iterations=3,
        usage={"calls": 2},
        repairs=["r"],
        todo_nudges=1,
        structured_attempts=2,
        max_token_continuations=1,
        empty_retries=1,
        compactions=[compaction_record("overflow", 4)],
        budget_stop={"kind": "tokens"},
        grace=True,
        completion_recoveries=1,
        auto_recovery_exhausted=True,
        stop_reentries=2,
        goal_verdicts=[{"action": "continue"}],
        todos_remaining=3,
        usage_incomplete=True,
        reported_as={"stopReason": "cancelled"},
    )
    assert list(summary.wire().items()) == [
        ("iterations", 3),
        ("repairs", ["r"]),
        ("todoNudges", 1),
        ("structuredAttempts", 2),
        ("maxTokenContinuations", 1),
        ("emptyRetries", 1),
        ("compactions", [{"reason": "overflow", "replacedMessages": 4}]),
        ("budgetStop", {"kind": "tokens"}),
        ("grace", True),
        ("usage", {"calls": 2, "incomplete": True}),
        ("completionRecoveries", 1),
        ("autoRecoveryExhausted", True),
        ("stopReentries", 2),
        ("goalVerdicts", [{"action": "continue"}]),
        ("todosRemaining", 3),
        ("reportedAs", {"stopReason": "cancelled"}),
    ]


def test_an_incomplete_usage_leaves_the_ledger_report_unchanged() -> None:
    usage = {"calls": 1}
    TurnSummary(iterations=1, usage=usage, usage_incomplete=True).wire()
    assert usage == {"calls": 1}


def test_a_goal_round_names_budget_spent_only_when_it_was() -> None:
    assert GoalRound([], "continue").wire() == {"attempts": [], "action": "continue"}
    full = GoalRound([{"lane": "small"}], "pause", {"decision": "done"}, {"passed": True}, budget_spent=True)
    assert list(full.wire()) == ["attempts", "action", "verdict", "verification", "budgetSpent"]

"""Team access (R-X2) as pure logic: a principal's access to a session from the session's
owner and shares and the token's teams; which team names a token may carry."""

from __future__ import annotations

import pytest

from agentd.infra.auth import team_names
from agentd.transport.sharing import Access, access_of, denied, holder


@pytest.mark.parametrize(
    ("principal", "teams", "shares", "expected"),
    [
        ("alice", [], {}, Access.OWNER),  # the owner, with or without teams
        ("alice", ["core"], {"core": "watch"}, Access.OWNER),
        ("bob", [], {"core": "drive"}, Access.NONE),  # in no team
        ("bob", ["ops"], {"core": "drive"}, Access.NONE),  # in another team
        ("bob", ["core"], {"core": "watch"}, Access.WATCH),
        ("bob", ["core"], {"core": "drive"}, Access.DRIVE),
        ("bob", ["core", "ops"], {"core": "watch", "ops": "drive"}, Access.DRIVE),  # the highest
        ("bob", ["ops", "core"], {"core": "drive", "ops": "watch"}, Access.DRIVE),
        ("bob", ["core"], {"core": "owner"}, Access.NONE),  # never more than drive from a share
        ("bob", ["core"], {"core": "bogus"}, Access.NONE),
    ],
)
def test_access_of(principal: str, teams: list[str], shares: dict[str, str], expected: Access) -> None:
    assert access_of(principal, teams, "alice", shares) is expected


def test_access_ranks_in_order() -> None:
    ranks = [a.rank for a in (Access.NONE, Access.WATCH, Access.DRIVE, Access.OWNER)]
    assert ranks == sorted(ranks) and len(set(ranks)) == 4


def test_denied_says_what_the_caller_has_and_needs() -> None:
    err = denied("sess_1", Access.WATCH, Access.DRIVE)
    assert err.code == -32014 and err.data == {"access": "watch", "needs": "drive"}
    assert "watch" in err.message and "drive" in err.message
    assert "owner" in denied("sess_1", Access.DRIVE, Access.OWNER).message


def test_team_names_are_checked_and_deduplicated() -> None:
    assert team_names(["core", "ops", "core", "a.b_c-9"]) == ("core", "ops", "a.b_c-9")
    assert team_names([]) == ()
    for bad in ("", " core", "-x", "a b", "a,b", "x" * 65, "ü"):
        with pytest.raises(ValueError, match="bad team name"):
            team_names([bad])


def test_holder_reads_who_a_sink_acts_as() -> None:
    class Conn:
        principal = "bob"
        teams = frozenset({"core"})

    class Wrapped:
        _conn = Conn()

    assert holder(Conn()) == ("bob", frozenset({"core"}))
    assert holder(Wrapped()) == ("bob", frozenset({"core"}))
    assert holder(object()) is None

"""The public names of `agentd.session.eventlog`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentd._faces import lazy_face

if TYPE_CHECKING:
    from agentd.session.eventlog.attach import AttachHost as AttachHost
    from agentd.session.eventlog.hub import EventHub as EventHub
    from agentd.session.eventlog.hub import Subscriber as Subscriber
    from agentd.session.eventlog.journal import PARTIAL_CHECKPOINT_INTERVAL_S as PARTIAL_CHECKPOINT_INTERVAL_S
    from agentd.session.eventlog.journal import Journal as Journal
    from agentd.session.eventlog.journal import turn_ended as turn_ended
    from agentd.session.eventlog.recovery import RECENT_KINDS as RECENT_KINDS
    from agentd.session.eventlog.recovery import RECENT_LIMIT as RECENT_LIMIT
    from agentd.session.eventlog.recovery import RecoveryHost as RecoveryHost
    from agentd.session.eventlog.recovery import recover as recover
    from agentd.session.eventlog.replayer import ReplayAborted as ReplayAborted
    from agentd.session.eventlog.replayer import ReplayMode as ReplayMode
    from agentd.session.eventlog.replayer import replay as replay
    from agentd.session.eventlog.writer import EventWriter as EventWriter

# The public names, each loaded from its module on first use (PEP 562): importing the package
# costs nothing, so a started server loads only what it runs.
_WHERE = {
    "turn_ended": "agentd.session.eventlog.journal",
    "AttachHost": "agentd.session.eventlog.attach",
    "EventHub": "agentd.session.eventlog.hub",
    "EventWriter": "agentd.session.eventlog.writer",
    "Journal": "agentd.session.eventlog.journal",
    "PARTIAL_CHECKPOINT_INTERVAL_S": "agentd.session.eventlog.journal",
    "RECENT_KINDS": "agentd.session.eventlog.recovery",
    "RECENT_LIMIT": "agentd.session.eventlog.recovery",
    "recover": "agentd.session.eventlog.recovery",
    "RecoveryHost": "agentd.session.eventlog.recovery",
    "replay": "agentd.session.eventlog.replayer",
    "ReplayAborted": "agentd.session.eventlog.replayer",
    "ReplayMode": "agentd.session.eventlog.replayer",
    "Subscriber": "agentd.session.eventlog.hub",
}


__all__ = [
    "PARTIAL_CHECKPOINT_INTERVAL_S",
    "RECENT_KINDS",
    "RECENT_LIMIT",
    "AttachHost",
    "EventHub",
    "EventWriter",
    "Journal",
    "ReplayAborted",
    "ReplayMode",
    "Subscriber",
    "recover",
    "replay",
    "turn_ended",
]

__getattr__, __dir__ = lazy_face(globals(), _WHERE)

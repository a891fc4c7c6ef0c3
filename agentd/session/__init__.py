"""The public names of `agentd.session`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentd._faces import lazy_face

if TYPE_CHECKING:
    from agentd.session.actor.session_actor import SessionActor as SessionActor
    from agentd.session.changes import session_changes as session_changes
    from agentd.session.command_syntax import Advertised as Advertised
    from agentd.session.commands import ROUTED_FROM as ROUTED_FROM
    from agentd.session.commands import AttachMcp as AttachMcp
    from agentd.session.commands import Cancel as Cancel
    from agentd.session.commands import Compact as Compact
    from agentd.session.commands import Detach as Detach
    from agentd.session.commands import EnqueueAck as EnqueueAck
    from agentd.session.commands import GoalClear as GoalClear
    from agentd.session.commands import GoalGet as GoalGet
    from agentd.session.commands import GoalSet as GoalSet
    from agentd.session.commands import Interject as Interject
    from agentd.session.commands import InterjectResult as InterjectResult
    from agentd.session.commands import Prompt as Prompt
    from agentd.session.commands import PromptDone as PromptDone
    from agentd.session.commands import QueueOp as QueueOp
    from agentd.session.commands import RegisterHook as RegisterHook
    from agentd.session.commands import RevertFile as RevertFile
    from agentd.session.commands import Rewind as Rewind
    from agentd.session.commands import SetAgent as SetAgent
    from agentd.session.commands import SetMode as SetMode
    from agentd.session.commands import SetModel as SetModel
    from agentd.session.commands import SetPlan as SetPlan
    from agentd.session.commands import SetTitle as SetTitle
    from agentd.session.config_options import MODES as MODES
    from agentd.session.config_options import PLAN_OFF as PLAN_OFF
    from agentd.session.config_options import PLAN_ON as PLAN_ON
    from agentd.session.config_options import model_choices as model_choices
    from agentd.session.config_options import session_config_options as session_config_options
    from agentd.session.errors import ResyncReason as ResyncReason
    from agentd.session.errors import SessionError as SessionError
    from agentd.session.errors import SessionErrorKind as SessionErrorKind
    from agentd.session.eventlog.attach import attach as attach
    from agentd.session.eventlog.attach import check_cursor as check_cursor
    from agentd.session.eventlog.hub import EventHub as EventHub
    from agentd.session.eventlog.hub import Subscriber as Subscriber
    from agentd.session.eventlog.replayer import ReplayAborted as ReplayAborted
    from agentd.session.eventlog.replayer import ReplayMode as ReplayMode
    from agentd.session.eventlog.writer import EventWriter as EventWriter
    from agentd.session.manager import SessionManager as SessionManager
    from agentd.session.portable import PortabilityError as PortabilityError
    from agentd.session.portable import export_session as export_session
    from agentd.session.portable import import_session as import_session
    from agentd.session.portable import parse as parse
    from agentd.session.prompt_answer import ended_turn as ended_turn
    from agentd.session.replicas.leases import session_leases as session_leases
    from agentd.session.replicas.live import LivePublisher as LivePublisher
    from agentd.session.replicas.live_watch import WatchAnnouncer as WatchAnnouncer
    from agentd.session.replicas.remote import RemoteWatches as RemoteWatches
    from agentd.session.replicas.routing import OwnerGone as OwnerGone
    from agentd.session.replicas.routing import Router as Router
    from agentd.session.replicas.takeover import start_takeover as start_takeover
    from agentd.session.services import ActorServices as ActorServices
    from agentd.session.sinks import Frame as Frame
    from agentd.session.sinks import FrameSink as FrameSink
    from agentd.session.sinks import Gated as Gated
    from agentd.session.sinks import requesting as requesting
    from agentd.session.sinks import tracked_sessions as tracked_sessions
    from agentd.session.sinks import urgent as urgent
    from agentd.session.turn_kit import TurnKit as TurnKit
    from agentd.session.turn_kit import build_kit as build_kit

# The public names, each loaded from its module on first use (PEP 562): importing the package
# costs nothing, so a started server loads only what it runs.
_WHERE = {
    "ended_turn": "agentd.session.prompt_answer",
    "ActorServices": "agentd.session.services",
    "Advertised": "agentd.session.command_syntax",
    "attach": "agentd.session.eventlog.attach",
    "AttachMcp": "agentd.session.commands",
    "build_kit": "agentd.session.turn_kit",
    "Cancel": "agentd.session.commands",
    "check_cursor": "agentd.session.eventlog.attach",
    "Compact": "agentd.session.commands",
    "Detach": "agentd.session.commands",
    "EnqueueAck": "agentd.session.commands",
    "EventHub": "agentd.session.eventlog.hub",
    "EventWriter": "agentd.session.eventlog.writer",
    "export_session": "agentd.session.portable",
    "Frame": "agentd.session.sinks",
    "Gated": "agentd.session.sinks",
    "FrameSink": "agentd.session.sinks",
    "GoalClear": "agentd.session.commands",
    "GoalGet": "agentd.session.commands",
    "GoalSet": "agentd.session.commands",
    "import_session": "agentd.session.portable",
    "Interject": "agentd.session.commands",
    "InterjectResult": "agentd.session.commands",
    "LivePublisher": "agentd.session.replicas.live",
    "WatchAnnouncer": "agentd.session.replicas.live_watch",
    "model_choices": "agentd.session.config_options",
    "MODES": "agentd.session.config_options",
    "OwnerGone": "agentd.session.replicas.routing",
    "parse": "agentd.session.portable",
    "PLAN_OFF": "agentd.session.config_options",
    "PLAN_ON": "agentd.session.config_options",
    "PortabilityError": "agentd.session.portable",
    "Prompt": "agentd.session.commands",
    "PromptDone": "agentd.session.commands",
    "QueueOp": "agentd.session.commands",
    "RegisterHook": "agentd.session.commands",
    "RemoteWatches": "agentd.session.replicas.remote",
    "ReplayAborted": "agentd.session.eventlog.replayer",
    "ReplayMode": "agentd.session.eventlog.replayer",
    "requesting": "agentd.session.sinks",
    "ResyncReason": "agentd.session.errors",
    "RevertFile": "agentd.session.commands",
    "Rewind": "agentd.session.commands",
    "ROUTED_FROM": "agentd.session.commands",
    "Router": "agentd.session.replicas.routing",
    "session_changes": "agentd.session.changes",
    "session_config_options": "agentd.session.config_options",
    "session_leases": "agentd.session.replicas.leases",
    "SessionActor": "agentd.session.actor.session_actor",
    "SessionError": "agentd.session.errors",
    "SessionErrorKind": "agentd.session.errors",
    "SessionManager": "agentd.session.manager",
    "SetAgent": "agentd.session.commands",
    "SetMode": "agentd.session.commands",
    "SetModel": "agentd.session.commands",
    "SetPlan": "agentd.session.commands",
    "SetTitle": "agentd.session.commands",
    "start_takeover": "agentd.session.replicas.takeover",
    "Subscriber": "agentd.session.eventlog.hub",
    "tracked_sessions": "agentd.session.sinks",
    "TurnKit": "agentd.session.turn_kit",
    "urgent": "agentd.session.sinks",
}


__all__ = [
    "MODES",
    "PLAN_OFF",
    "PLAN_ON",
    "ROUTED_FROM",
    "ActorServices",
    "Advertised",
    "AttachMcp",
    "Cancel",
    "Compact",
    "Detach",
    "EnqueueAck",
    "EventHub",
    "EventWriter",
    "Frame",
    "FrameSink",
    "Gated",
    "GoalClear",
    "GoalGet",
    "GoalSet",
    "Interject",
    "InterjectResult",
    "LivePublisher",
    "OwnerGone",
    "PortabilityError",
    "Prompt",
    "PromptDone",
    "QueueOp",
    "RegisterHook",
    "RemoteWatches",
    "ReplayAborted",
    "ReplayMode",
    "ResyncReason",
    "RevertFile",
    "Rewind",
    "Router",
    "SessionActor",
    "SessionError",
    "SessionErrorKind",
    "SessionManager",
    "SetAgent",
    "SetMode",
    "SetModel",
    "SetPlan",
    "SetTitle",
    "Subscriber",
    "TurnKit",
    "WatchAnnouncer",
    "attach",
    "build_kit",
    "check_cursor",
    "ended_turn",
    "export_session",
    "import_session",
    "model_choices",
    "parse",
    "requesting",
    "session_changes",
    "session_config_options",
    "session_leases",
    "start_takeover",
    "tracked_sessions",
    "urgent",
]

__getattr__, __dir__ = lazy_face(globals(), _WHERE)

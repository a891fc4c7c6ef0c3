"""The public names of `agentd.loop.detection`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentd._faces import lazy_face

if TYPE_CHECKING:
    from agentd.loop.detection.degeneration import NUDGE_TEXT as NUDGE_TEXT
    from agentd.loop.detection.degeneration import NoProgress as NoProgress
    from agentd.loop.detection.degeneration import Nudge as Nudge
    from agentd.loop.detection.degeneration import RepetitionDetector as RepetitionDetector
    from agentd.loop.detection.degeneration import RepetitionHit as RepetitionHit
    from agentd.loop.detection.degeneration import RetriableHit as RetriableHit
    from agentd.loop.detection.degeneration import Stationarity as Stationarity
    from agentd.loop.detection.degeneration import StationarityDecision as StationarityDecision
    from agentd.loop.detection.degeneration import StationarityLimits as StationarityLimits
    from agentd.loop.detection.degeneration import Stop as Stop
    from agentd.loop.detection.degeneration import detect_repetitive_text as detect_repetitive_text
    from agentd.loop.detection.degeneration import retriable_response as retriable_response
    from agentd.loop.detection.degeneration import with_no_progress_note as with_no_progress_note
    from agentd.loop.detection.sequence import CallRecord as CallRecord
    from agentd.loop.detection.sequence import LoopAction as LoopAction
    from agentd.loop.detection.sequence import LoopDetector as LoopDetector
    from agentd.loop.detection.sequence import LoopDetectorLimits as LoopDetectorLimits
    from agentd.loop.detection.sequence import LoopVerdict as LoopVerdict
    from agentd.loop.detection.sequence import shell_failed as shell_failed

# The public names, each loaded from its module on first use (PEP 562): importing the package
# costs nothing, so a started server loads only what it runs.
_WHERE = {
    "CallRecord": "agentd.loop.detection.sequence",
    "LoopAction": "agentd.loop.detection.sequence",
    "LoopDetector": "agentd.loop.detection.sequence",
    "LoopDetectorLimits": "agentd.loop.detection.sequence",
    "LoopVerdict": "agentd.loop.detection.sequence",
    "NoProgress": "agentd.loop.detection.degeneration",
    "Nudge": "agentd.loop.detection.degeneration",
    "NUDGE_TEXT": "agentd.loop.detection.degeneration",
    "RepetitionDetector": "agentd.loop.detection.degeneration",
    "RepetitionHit": "agentd.loop.detection.degeneration",
    "detect_repetitive_text": "agentd.loop.detection.degeneration",
    "retriable_response": "agentd.loop.detection.degeneration",
    "RetriableHit": "agentd.loop.detection.degeneration",
    "shell_failed": "agentd.loop.detection.sequence",
    "Stationarity": "agentd.loop.detection.degeneration",
    "StationarityDecision": "agentd.loop.detection.degeneration",
    "StationarityLimits": "agentd.loop.detection.degeneration",
    "Stop": "agentd.loop.detection.degeneration",
    "with_no_progress_note": "agentd.loop.detection.degeneration",
}


__all__ = [
    "NUDGE_TEXT",
    "CallRecord",
    "LoopAction",
    "LoopDetector",
    "LoopDetectorLimits",
    "LoopVerdict",
    "NoProgress",
    "Nudge",
    "RepetitionDetector",
    "RepetitionHit",
    "RetriableHit",
    "Stationarity",
    "StationarityDecision",
    "StationarityLimits",
    "Stop",
    "detect_repetitive_text",
    "retriable_response",
    "shell_failed",
    "with_no_progress_note",
]

__getattr__, __dir__ = lazy_face(globals(), _WHERE)

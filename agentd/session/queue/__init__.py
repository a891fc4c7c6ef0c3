"""The public names of `agentd.session.queue`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentd._faces import lazy_face

if TYPE_CHECKING:
    from agentd.session.queue import ops as ops
    from agentd.session.queue.entry import QueuedPrompt as QueuedPrompt
    from agentd.session.queue.entry import new_id as new_id
    from agentd.session.queue.entry import request_id_of as request_id_of
    from agentd.session.queue.host import DeskHost as DeskHost
    from agentd.session.queue.idempotency import REQUEST_DIGEST as REQUEST_DIGEST
    from agentd.session.queue.idempotency import request_digest_of as request_digest_of
    from agentd.session.queue.ops import QueueKind as QueueKind
    from agentd.session.queue.prompt_queue import PromptQueue as PromptQueue
    from agentd.session.queue.prompt_queue import resolve as resolve
    from agentd.session.queue.sync import QueuedBytes as QueuedBytes
    from agentd.session.queue.sync import answer_all as answer_all

# The public names, each loaded from its module on first use (PEP 562): importing the package
# costs nothing, so a started server loads only what it runs.
_WHERE = {
    "answer_all": "agentd.session.queue.sync",
    "DeskHost": "agentd.session.queue.host",
    "new_id": "agentd.session.queue.entry",
    "PromptQueue": "agentd.session.queue.prompt_queue",
    "QueuedBytes": "agentd.session.queue.sync",
    "QueuedPrompt": "agentd.session.queue.entry",
    "QueueKind": "agentd.session.queue.ops",
    "REQUEST_DIGEST": "agentd.session.queue.idempotency",
    "request_digest_of": "agentd.session.queue.idempotency",
    "request_id_of": "agentd.session.queue.entry",
    "resolve": "agentd.session.queue.prompt_queue",
}


__all__ = [
    "REQUEST_DIGEST",
    "DeskHost",
    "PromptQueue",
    "QueueKind",
    "QueuedBytes",
    "QueuedPrompt",
    "answer_all",
    "new_id",
    "ops",
    "request_digest_of",
    "request_id_of",
    "resolve",
]

__getattr__, __dir__ = lazy_face(globals(), _WHERE)

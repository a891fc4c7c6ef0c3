"""Client sinks for the hub's unit tests (agentd/session/eventlog/hub.py): what each client
was sent, encoded as a connection would send it."""

from __future__ import annotations

from typing import Any

from agentd.transport.render import encode_message


class PlainSink:
    """A client that takes (method, params) only (an SSE viewer's shape)."""

    def __init__(self, sink_id: str, capacity: int = 1000, unsupported: frozenset[str] = frozenset()) -> None:
        self.id = sink_id
        self.capacity = capacity
        self.unsupported = unsupported
        self.texts: list[bytes] = []  # what went to the client, encoded as a connection queues it
        self.urgent: list[tuple[str, dict[str, Any]]] = []

    def send_notification(self, method: str, params: dict[str, Any]) -> bool:
        return self._queue(encode_message(method, params))

    async def send_replay(self, method: str, params: dict[str, Any]) -> bool:
        return self._queue(encode_message(method, params))

    def send_urgent(self, method: str, params: dict[str, Any]) -> None:
        self.urgent.append((method, params))

    def supports_update(self, session_update: str) -> bool:
        return session_update not in self.unsupported

    def _queue(self, text: bytes) -> bool:
        if len(self.texts) >= self.capacity:
            return False
        self.texts.append(text)
        return True


class EncodedSink(PlainSink):
    """A client connection that also takes text encoded once for everyone (`Connection`)."""

    def __init__(self, sink_id: str, capacity: int = 1000, unsupported: frozenset[str] = frozenset()) -> None:
        super().__init__(sink_id, capacity, unsupported)
        self.encoded: list[bytes] = []  # the subset that came pre-encoded

    def send_encoded(self, text: bytes) -> bool:
        if not self._queue(text):
            return False
        self.encoded.append(text)
        return True

"""The ACP methods agentd implements (R-P2), one module per job; `registry.py` holds the table
the dispatcher serves."""

from agentd.transport.handlers.registry import METHODS, UNSUPPORTED

__all__ = ["METHODS", "UNSUPPORTED"]

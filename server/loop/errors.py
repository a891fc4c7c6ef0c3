"""Re-exports error kinds and recovery hints: they live in `server.core.errors`
(the shared domain types, below every layer); this old path keeps working."""

from server.core.errors import (  # re-export
    ErrorKind,
    HarnessError,
    RecoveryHint,
    hint,
)

__all__ = [
    "ErrorKind",
    "HarnessError",
    "RecoveryHint",
    "hint",
]

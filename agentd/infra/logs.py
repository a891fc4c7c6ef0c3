"""Logging for `agentd serve` (R-O): readable lines, or one JSON object per line
(`AGENTD_LOG_FORMAT=json`) for log pipelines. uvicorn's own loggers go through the same
handler, so a deployment gets one consistent stream."""

from __future__ import annotations

import logging
import re
from collections.abc import MutableMapping
from typing import IO, Any
from urllib.parse import unquote_plus

from agentd.core import LOG_CONTEXT_FIELDS, LogContextFilter
from agentd.infra.config import LogFormat

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# A `key=value` of a query string in a logged URL (uvicorn logs request lines on
# `uvicorn.access` and WebSocket handshakes on `uvicorn.error`, the raw query as sent).
_QUERY_PAIR = re.compile(r"([?&;])([^=&;?#\s\"']*)=([^&;#\s\"']*)")
SERVER_LOGGERS = ("uvicorn.access", "uvicorn.error")
_SECRET_KEYS = frozenset({"token"})
_MAX_UNQUOTE = 8  # `%2565` is `%65` is `e`: decode until stable (bounded)


def decoded_key(key: str) -> str:
    """A query key as the server would read it — percent- and plus-decoded (repeatedly: a
    proxy may decode once more) — folded to lower case."""
    for _ in range(_MAX_UNQUOTE):
        plain = unquote_plus(key)
        if plain == key:
            break
        key = plain
    return key.strip().lower()


def _redact_pair(m: re.Match[str]) -> str:
    if decoded_key(m.group(2)) in _SECRET_KEYS:
        return f"{m.group(1)}{m.group(2)}=***"
    return m.group(0)


def redact_token(text: str) -> str:
    """`text` with the value of every `token` query parameter replaced by `***` — in any
    spelling the server accepts it (`?tok%65n=`, `?%74oken=`) or might (`?TOKEN=`)."""
    if "=" not in text:
        return text
    return _QUERY_PAIR.sub(_redact_pair, text)


class RedactTokens(logging.Filter):
    """Rewrites a record so no `token=` value reaches a handler: the message is redacted
    once formatted, so a URL split over several arguments is caught too."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: redact its parts as they are
            if isinstance(record.msg, str):
                record.msg = redact_token(record.msg)
            if isinstance(record.args, tuple):
                record.args = tuple(_redact_arg(a) for a in record.args)
            return True
        redacted = redact_token(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True


def _redact_arg(value: Any) -> Any:
    return redact_token(value) if isinstance(value, str) else value


def redact_tokens_in_server_logs() -> None:
    """Install the filter on uvicorn's loggers (once; every app creation calls this)."""
    for name in SERVER_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactTokens) for f in logger.filters):
            logger.addFilter(RedactTokens())


def _add_log_context(
    logger: Any, method_name: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """The record's `session_id` / `turn_id` (set by `LogContextFilter`) as JSON keys, when set."""
    record = event_dict.get("_record")
    for name in LOG_CONTEXT_FIELDS:
        value = getattr(record, name, None)
        if value is not None:
            event_dict[name] = value
    return event_dict


def log_handler(fmt: LogFormat, stream: IO[str] | None = None) -> logging.Handler:
    """The one handler of `agentd serve` (stderr unless `stream`), records carrying their
    session/turn context as fields."""
    handler = logging.StreamHandler(stream)
    handler.addFilter(LogContextFilter())
    handler.addFilter(RedactTokens())  # every logger's records, not only uvicorn's
    if fmt is LogFormat.JSON:
        # Imported here: structlog loads rich and pygments (~100 modules, several MiB
        # resident) that the default text format never needs.
        import structlog

        handler.setFormatter(
            structlog.stdlib.ProcessorFormatter(
                foreign_pre_chain=[
                    structlog.stdlib.add_log_level,
                    structlog.stdlib.add_logger_name,
                    structlog.processors.TimeStamper(fmt="iso", utc=True),
                    _add_log_context,
                ],
                processors=[
                    structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    structlog.processors.format_exc_info,
                    structlog.processors.JSONRenderer(),
                ],
            )
        )
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    return handler


def configure_logging(level: str, fmt: LogFormat) -> None:
    handler = log_handler(fmt)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers.clear()
        logging.getLogger(name).propagate = True
    # On the handler: a logger's own filters do not see its children's records.
    handler.addFilter(MigrationChatter())


class MigrationChatter(logging.Filter):
    """Alembic's INFO lines (plugins set up, one per migration: ~20 on a first start) are
    chatter to a user: logged as DEBUG, shown only with AGENTD_LOG_LEVEL=debug."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.INFO and record.name.startswith("alembic"):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger().isEnabledFor(logging.DEBUG)
        return True

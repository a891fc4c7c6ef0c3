"""The public names of `agentd.store`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentd._faces import lazy_face

if TYPE_CHECKING:
    from agentd.store import claims as claims
    from agentd.store import leases as leases
    from agentd.store import routed as routed
    from agentd.store import snapshots as snapshots
    from agentd.store.aio import use_sqlalchemy_engine as use_sqlalchemy_engine
    from agentd.store.broker import Broker as Broker
    from agentd.store.broker import Gap as Gap
    from agentd.store.broker import PgBroker as PgBroker
    from agentd.store.broker import Subscription as Subscription
    from agentd.store.db import Batch as Batch
    from agentd.store.db import LoadedSession as LoadedSession
    from agentd.store.db import Store as Store
    from agentd.store.db import StoredEvent as StoredEvent
    from agentd.store.db import TokenRecord as TokenRecord
    from agentd.store.deadline import until as until
    from agentd.store.disconnects import is_disconnect as is_disconnect
    from agentd.store.engine import PoolLimits as PoolLimits
    from agentd.store.export_codec import FORMAT as FORMAT
    from agentd.store.export_codec import VERSION as VERSION
    from agentd.store.export_codec import ExportFormatError as ExportFormatError
    from agentd.store.export_codec import SessionBundle as SessionBundle
    from agentd.store.export_codec import decode as decode
    from agentd.store.export_codec import encode_all as encode_all
    from agentd.store.export_codec import safe_relative as safe_relative
    from agentd.store.export_rows import ImportConflict as ImportConflict
    from agentd.store.export_rows import read_bundle as read_bundle
    from agentd.store.export_rows import write_bundle as write_bundle
    from agentd.store.file_lock import DatabaseInUse as DatabaseInUse
    from agentd.store.file_lock import lock_database as lock_database
    from agentd.store.leases import StaleFence as StaleFence
    from agentd.store.leases import is_stale_fence as is_stale_fence
    from agentd.store.leases import is_unique_violation as is_unique_violation
    from agentd.store.notify import EVENTS_CHANNEL as EVENTS_CHANNEL
    from agentd.store.notify import MAX_SESSION_ID as MAX_SESSION_ID
    from agentd.store.notify import SHARES_CHANNEL as SHARES_CHANNEL
    from agentd.store.notify import TAKEOVER_CHANNEL as TAKEOVER_CHANNEL
    from agentd.store.notify import PgListener as PgListener
    from agentd.store.notify import parse_events_payload as parse_events_payload
    from agentd.store.queue_rows import QueueWrite as QueueWrite
    from agentd.store.records import EventWrite as EventWrite
    from agentd.store.records import SessionRecord as SessionRecord
    from agentd.store.records import SessionSummary as SessionSummary
    from agentd.store.redis_broker import RedisBroker as RedisBroker
    from agentd.store.routed import RoutedCommand as RoutedCommand
    from agentd.store.routed import State as State
    from agentd.store.routed import Wake as Wake
    from agentd.store.schema_head import sqlite_at_head as sqlite_at_head
    from agentd.store.snapshots import FileSnapshot as FileSnapshot
    from agentd.store.snapshots import TurnCut as TurnCut
    from agentd.store.snapshots import TurnMark as TurnMark

# The public names, each loaded from its module on first use (PEP 562): importing the package
# costs nothing, so a started server loads only what it runs.
_WHERE = {
    "Batch": "agentd.store.db",
    "EventWrite": "agentd.store.records",
    "Broker": "agentd.store.broker",
    "DatabaseInUse": "agentd.store.file_lock",
    "decode": "agentd.store.export_codec",
    "encode_all": "agentd.store.export_codec",
    "EVENTS_CHANNEL": "agentd.store.notify",
    "ExportFormatError": "agentd.store.export_codec",
    "FileSnapshot": "agentd.store.snapshots",
    "FORMAT": "agentd.store.export_codec",
    "Gap": "agentd.store.broker",
    "ImportConflict": "agentd.store.export_rows",
    "is_disconnect": "agentd.store.disconnects",
    "use_sqlalchemy_engine": "agentd.store.aio",
    "is_stale_fence": "agentd.store.leases",
    "is_unique_violation": "agentd.store.leases",
    "StaleFence": "agentd.store.leases",
    "LoadedSession": "agentd.store.db",
    "lock_database": "agentd.store.file_lock",
    "MAX_SESSION_ID": "agentd.store.notify",
    "parse_events_payload": "agentd.store.notify",
    "PgBroker": "agentd.store.broker",
    "PgListener": "agentd.store.notify",
    "PoolLimits": "agentd.store.engine",
    "QueueWrite": "agentd.store.queue_rows",
    "read_bundle": "agentd.store.export_rows",
    "RedisBroker": "agentd.store.redis_broker",
    "RoutedCommand": "agentd.store.routed",
    "safe_relative": "agentd.store.export_codec",
    "sqlite_at_head": "agentd.store.schema_head",
    "SessionBundle": "agentd.store.export_codec",
    "SessionRecord": "agentd.store.records",
    "SessionSummary": "agentd.store.records",
    "SHARES_CHANNEL": "agentd.store.notify",
    "TAKEOVER_CHANNEL": "agentd.store.notify",
    "State": "agentd.store.routed",
    "Store": "agentd.store.db",
    "StoredEvent": "agentd.store.db",
    "Subscription": "agentd.store.broker",
    "TokenRecord": "agentd.store.db",
    "TurnCut": "agentd.store.snapshots",
    "TurnMark": "agentd.store.snapshots",
    "until": "agentd.store.deadline",
    "VERSION": "agentd.store.export_codec",
    "Wake": "agentd.store.routed",
    "write_bundle": "agentd.store.export_rows",
}


__all__ = [
    "EVENTS_CHANNEL",
    "FORMAT",
    "MAX_SESSION_ID",
    "SHARES_CHANNEL",
    "TAKEOVER_CHANNEL",
    "VERSION",
    "Batch",
    "Broker",
    "DatabaseInUse",
    "EventWrite",
    "ExportFormatError",
    "FileSnapshot",
    "Gap",
    "ImportConflict",
    "LoadedSession",
    "PgBroker",
    "PgListener",
    "PoolLimits",
    "QueueWrite",
    "RedisBroker",
    "RoutedCommand",
    "SessionBundle",
    "SessionRecord",
    "SessionSummary",
    "StaleFence",
    "State",
    "Store",
    "StoredEvent",
    "Subscription",
    "TokenRecord",
    "TurnCut",
    "TurnMark",
    "Wake",
    "claims",
    "decode",
    "encode_all",
    "is_disconnect",
    "is_stale_fence",
    "is_unique_violation",
    "leases",
    "lock_database",
    "parse_events_payload",
    "read_bundle",
    "routed",
    "safe_relative",
    "snapshots",
    "sqlite_at_head",
    "until",
    "use_sqlalchemy_engine",
    "write_bundle",
]

__getattr__, __dir__ = lazy_face(globals(), _WHERE)

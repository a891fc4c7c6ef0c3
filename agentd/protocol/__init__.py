"""agentd's wire contract: JSON-RPC 2.0 envelopes, the ACP methods agentd implements, its
`_agentd/` extensions, and a JSON Schema export. Importable by clients; depends on
pydantic only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentd._faces import lazy_face
from agentd.protocol.jsonrpc import ErrorCode, RpcError

if TYPE_CHECKING:
    from agentd.protocol import outgoing as outgoing
    from agentd.protocol.acp import PROTOCOL_VERSION as PROTOCOL_VERSION
    from agentd.protocol.acp import AudioContent as AudioContent
    from agentd.protocol.acp import AuthenticateParams as AuthenticateParams
    from agentd.protocol.acp import ClientCapabilities as ClientCapabilities
    from agentd.protocol.acp import ContentBlock as ContentBlock
    from agentd.protocol.acp import EmbeddedResource as EmbeddedResource
    from agentd.protocol.acp import ImageContent as ImageContent
    from agentd.protocol.acp import InitializeParams as InitializeParams
    from agentd.protocol.acp import ListSessionsParams as ListSessionsParams
    from agentd.protocol.acp import LoadSessionParams as LoadSessionParams
    from agentd.protocol.acp import NewSessionParams as NewSessionParams
    from agentd.protocol.acp import PromptParams as PromptParams
    from agentd.protocol.acp import RequestPermissionResult as RequestPermissionResult
    from agentd.protocol.acp import ResourceLink as ResourceLink
    from agentd.protocol.acp import SessionIdParams as SessionIdParams
    from agentd.protocol.acp import SetConfigOptionParams as SetConfigOptionParams
    from agentd.protocol.acp import SetModeParams as SetModeParams
    from agentd.protocol.acp import StopReason as StopReason
    from agentd.protocol.acp import TextContent as TextContent
    from agentd.protocol.acp import dump as dump
    from agentd.protocol.agentd import AGENTD_CLIENT as AGENTD_CLIENT
    from agentd.protocol.agentd import AttachParams as AttachParams
    from agentd.protocol.agentd import ChangesParams as ChangesParams
    from agentd.protocol.agentd import EnqueueParams as EnqueueParams
    from agentd.protocol.agentd import ExportParams as ExportParams
    from agentd.protocol.agentd import ForkParams as ForkParams
    from agentd.protocol.agentd import GoalSetParams as GoalSetParams
    from agentd.protocol.agentd import HooksRegisterParams as HooksRegisterParams
    from agentd.protocol.agentd import ImportParams as ImportParams
    from agentd.protocol.agentd import InterjectParams as InterjectParams
    from agentd.protocol.agentd import ModelsListParams as ModelsListParams
    from agentd.protocol.agentd import OptIn as OptIn
    from agentd.protocol.agentd import PermissionRespondParams as PermissionRespondParams
    from agentd.protocol.agentd import QueueOpParams as QueueOpParams
    from agentd.protocol.agentd import RenameParams as RenameParams
    from agentd.protocol.agentd import RevertFileParams as RevertFileParams
    from agentd.protocol.agentd import RewindParams as RewindParams
    from agentd.protocol.agentd import SessionParams as SessionParams
    from agentd.protocol.agentd import ShareParams as ShareParams
    from agentd.protocol.frames import chunk_update as chunk_update
    from agentd.protocol.frames import session_notification as session_notification
    from agentd.protocol.jsonrpc import Request as Request
    from agentd.protocol.jsonrpc import error_response as error_response
    from agentd.protocol.jsonrpc import notification as notification
    from agentd.protocol.jsonrpc import request as request
    from agentd.protocol.jsonrpc import response as response
    from agentd.protocol.methods import AGENTD_PREFIX as AGENTD_PREFIX
    from agentd.protocol.methods import CANCEL_REQUEST as CANCEL_REQUEST
    from agentd.protocol.methods import EXTENSIONS as EXTENSIONS
    from agentd.protocol.methods import ClientRequest as ClientRequest
    from agentd.protocol.methods import Notification as Notification
    from agentd.protocol.methods import QueueOp as QueueOp
    from agentd.protocol.methods import Served as Served
    from agentd.protocol.methods import Unsupported as Unsupported
    from agentd.protocol.outgoing import Outgoing as Outgoing

# The public names, each loaded from its module on first use (PEP 562): importing the package
# costs nothing, so a started server loads only what it runs.
_WHERE = {
    "AGENTD_CLIENT": "agentd.protocol.agentd",
    "AGENTD_PREFIX": "agentd.protocol.methods",
    "AttachParams": "agentd.protocol.agentd",
    "AudioContent": "agentd.protocol.acp",
    "AuthenticateParams": "agentd.protocol.acp",
    "CANCEL_REQUEST": "agentd.protocol.methods",
    "ChangesParams": "agentd.protocol.agentd",
    "chunk_update": "agentd.protocol.frames",
    "ClientCapabilities": "agentd.protocol.acp",
    "ClientRequest": "agentd.protocol.methods",
    "ContentBlock": "agentd.protocol.acp",
    "dump": "agentd.protocol.acp",
    "EmbeddedResource": "agentd.protocol.acp",
    "EnqueueParams": "agentd.protocol.agentd",
    "error_response": "agentd.protocol.jsonrpc",
    "ExportParams": "agentd.protocol.agentd",
    "EXTENSIONS": "agentd.protocol.methods",
    "ForkParams": "agentd.protocol.agentd",
    "GoalSetParams": "agentd.protocol.agentd",
    "HooksRegisterParams": "agentd.protocol.agentd",
    "ImageContent": "agentd.protocol.acp",
    "ImportParams": "agentd.protocol.agentd",
    "InitializeParams": "agentd.protocol.acp",
    "InterjectParams": "agentd.protocol.agentd",
    "ListSessionsParams": "agentd.protocol.acp",
    "LoadSessionParams": "agentd.protocol.acp",
    "ModelsListParams": "agentd.protocol.agentd",
    "NewSessionParams": "agentd.protocol.acp",
    "notification": "agentd.protocol.jsonrpc",
    "Notification": "agentd.protocol.methods",
    "OptIn": "agentd.protocol.agentd",
    "Outgoing": "agentd.protocol.outgoing",
    "PermissionRespondParams": "agentd.protocol.agentd",
    "PromptParams": "agentd.protocol.acp",
    "PROTOCOL_VERSION": "agentd.protocol.acp",
    "QueueOp": "agentd.protocol.methods",
    "QueueOpParams": "agentd.protocol.agentd",
    "RenameParams": "agentd.protocol.agentd",
    "Request": "agentd.protocol.jsonrpc",
    "request": "agentd.protocol.jsonrpc",
    "RequestPermissionResult": "agentd.protocol.acp",
    "ResourceLink": "agentd.protocol.acp",
    "response": "agentd.protocol.jsonrpc",
    "RevertFileParams": "agentd.protocol.agentd",
    "RewindParams": "agentd.protocol.agentd",
    "Served": "agentd.protocol.methods",
    "session_notification": "agentd.protocol.frames",
    "SessionIdParams": "agentd.protocol.acp",
    "SessionParams": "agentd.protocol.agentd",
    "SetConfigOptionParams": "agentd.protocol.acp",
    "SetModeParams": "agentd.protocol.acp",
    "ShareParams": "agentd.protocol.agentd",
    "StopReason": "agentd.protocol.acp",
    "TextContent": "agentd.protocol.acp",
    "Unsupported": "agentd.protocol.methods",
}


__all__ = [
    "AGENTD_CLIENT",
    "AGENTD_PREFIX",
    "CANCEL_REQUEST",
    "EXTENSIONS",
    "PROTOCOL_VERSION",
    "AttachParams",
    "AudioContent",
    "AuthenticateParams",
    "ChangesParams",
    "ClientCapabilities",
    "ClientRequest",
    "ContentBlock",
    "EmbeddedResource",
    "EnqueueParams",
    "ErrorCode",
    "ExportParams",
    "ForkParams",
    "GoalSetParams",
    "HooksRegisterParams",
    "ImageContent",
    "ImportParams",
    "InitializeParams",
    "InterjectParams",
    "ListSessionsParams",
    "LoadSessionParams",
    "ModelsListParams",
    "NewSessionParams",
    "Notification",
    "OptIn",
    "Outgoing",
    "PermissionRespondParams",
    "PromptParams",
    "QueueOp",
    "QueueOpParams",
    "RenameParams",
    "Request",
    "RequestPermissionResult",
    "ResourceLink",
    "RevertFileParams",
    "RewindParams",
    "RpcError",
    "Served",
    "SessionIdParams",
    "SessionParams",
    "SetConfigOptionParams",
    "SetModeParams",
    "ShareParams",
    "StopReason",
    "TextContent",
    "Unsupported",
    "chunk_update",
    "dump",
    "error_response",
    "notification",
    "outgoing",
    "request",
    "response",
    "session_notification",
]

__getattr__, __dir__ = lazy_face(globals(), _WHERE)

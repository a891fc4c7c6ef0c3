"""agentd's wire contract: JSON-RPC 2.0 envelopes, the ACP methods agentd implements, its
`_agentd/` extensions, and a JSON Schema export. Importable by clients; depends on
pydantic only.
"""

from agentd.protocol.jsonrpc import ErrorCode, RpcError

__all__ = ["ErrorCode", "RpcError"]

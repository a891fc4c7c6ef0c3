"""Where a principal's sessions may work (R-X2, R-X4).

Without auth every caller is the local user: a session's cwd must lie inside
`AGENTD_WORKSPACE_ROOT` when that is set, anywhere otherwise (today's behaviour).

With `AGENTD_AUTH=token` principals must not reach each other's files, so each gets its
own root, `<base>/<principal>` (created on demand), where the base is
`AGENTD_WORKSPACE_ROOT` or, when unset, `<AGENTD_HOME>/workspaces`. A safe default rather
than "anywhere": a team server that forgot the setting must not hand every token the
server user's whole disk. `AGENTD_WORKSPACE_GRANTS` adds roots per principal (a shared
checkout, say). Containment is checked on resolved paths, so a symlink does not escape.
"""

from __future__ import annotations

import re
from pathlib import Path

from agentd.infra import AuthMode, Settings
from agentd.protocol import ErrorCode, RpcError

# A principal's own directory is named after it: only names that are one plain path
# segment qualify (no separators, no leading dot, so never `.` or `..`).
_DIR_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}")


def principal_base(settings: Settings) -> Path:
    return settings.workspace_root or settings.home / "workspaces"


def own_root(settings: Settings, principal: str) -> Path | None:
    """`<base>/<principal>`, or None for a principal whose name is not a directory name."""
    if not _DIR_NAME.fullmatch(principal):
        return None
    return principal_base(settings) / principal


def allowed_roots(settings: Settings, principal: str) -> list[Path] | None:
    """The roots a principal's cwd must lie in; None means anywhere (no auth, no root)."""
    if settings.auth is AuthMode.NONE:
        return [settings.workspace_root] if settings.workspace_root is not None else None
    own = own_root(settings, principal)
    return ([own] if own is not None else []) + list(settings.workspace_grants.get(principal, []))


def default_workspace(settings: Settings, principal: str) -> Path | None:
    """Where a session goes when its client names no folder (an empty cwd): the principal's
    own root with auth, else the workspace root, else `<AGENTD_HOME>/workspaces/default`.
    None: the principal has no directory of its own."""
    if settings.auth is not AuthMode.NONE:
        return own_root(settings, principal)
    return settings.workspace_root or settings.home / "workspaces" / "default"


def _denied(settings: Settings, principal: str, cwd: str) -> RpcError:
    if settings.auth is AuthMode.NONE:
        return RpcError(
            ErrorCode.WORKSPACE_DENIED, f"cwd {cwd} is outside the workspace root {settings.workspace_root}"
        )
    own = own_root(settings, principal)
    where = f"your workspace {own}" if own is not None else "your workspace"
    return RpcError(
        ErrorCode.WORKSPACE_DENIED,
        f"cwd {cwd} is outside {where}; an operator can grant more roots with AGENTD_WORKSPACE_GRANTS",
    )


def check_contained(settings: Settings, principal: str, cwd: str | Path) -> Path:
    """`cwd` resolved, or RpcError(WORKSPACE_DENIED) when it lies outside the principal's
    roots. Blocking (resolves symlinks, creates the principal's own root): run in a thread."""
    resolved = Path(cwd).resolve()
    roots = allowed_roots(settings, principal)
    if roots is None:
        return resolved
    own = own_root(settings, principal) if settings.auth is not AuthMode.NONE else None
    if own is not None and resolved.is_relative_to(own.resolve()):
        own.mkdir(mode=0o700, parents=True, exist_ok=True)  # on demand: the first session makes it
    if any(resolved.is_relative_to(Path(root).resolve()) for root in roots):
        return resolved
    raise _denied(settings, principal, str(cwd))

"""Which MCP servers a client may ask for (R-T9, R-X4, issue 28 item 2).

A stdio MCP server is a command the server starts; an HTTP one is a URL the server
fetches from inside its network. The operator's allow-lists govern both in every auth
mode: stdio commands must be listed in `AGENTD_MCP_ALLOWED_COMMANDS` (exact string, as
sent; `"*"` any) and HTTP URLs must fall under a prefix in `AGENTD_MCP_ALLOWED_URLS`
(same scheme and host, path under the prefix's; `"*"` any). Left unset, a list allows
anything without auth (the caller is the local user, and the command runs in the
sandbox anyway) and nothing with `AGENTD_AUTH=token`.

Where a command runs is the other half (`agentd.tools.mcp.client`): under the same sandbox as
`bash` unless it is named in `AGENTD_MCP_UNSANDBOXED`. An allowed command still gets the
client's args, so list only commands that cannot be turned into a shell by their
arguments (not `sh`, `python`, `npx`) — above all among the unsandboxed ones.
Environment variables that make any program load foreign code (the dynamic loader's,
interpreters' startup hooks) are refused whatever the command and the auth mode.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from agentd.infra import AuthMode, Settings
from agentd.tools.mcp.client import McpHttp, McpStdio

# Names (or prefixes, ending in "_") that inject code into whatever process reads them.
_CODE_INJECTING_ENV = (
    "LD_",
    "DYLD_",
    "PATH",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "PYTHONHOME",
    "NODE_OPTIONS",
    "NODE_PATH",
    "PERL5OPT",
    "PERL5LIB",
    "RUBYOPT",
    "RUBYLIB",
    "BASH_ENV",
    "ENV",
    "JAVA_TOOL_OPTIONS",
)


def _injects_code(name: str) -> bool:
    upper = name.upper()
    return any(upper.startswith(p) if p.endswith("_") else upper == p for p in _CODE_INJECTING_ENV)


def url_allowed(url: str, prefixes: list[str]) -> bool:
    """Same scheme and host:port as a prefix, and a path at or under the prefix's path (on
    a segment boundary: `https://h/api` allows `https://h/api/x`, not `https://h/apix`)."""
    target = urlsplit(url)
    segments = target.path.lower().replace("%2e", ".").split("/")
    if ".." in segments:  # `/api/../admin` starts with `/api/` but is not under it
        return False
    for prefix in prefixes:
        allowed = urlsplit(prefix)
        if (target.scheme.lower(), target.netloc.lower()) != (allowed.scheme.lower(), allowed.netloc.lower()):
            continue
        base = allowed.path.rstrip("/")
        if target.path == base or target.path.startswith(base + "/"):
            return True
    return False


ANY = "*"


def _allowed(listed: list[str] | None, settings: Settings) -> list[str]:
    """The operator's list, or the default for the auth mode when it is unset."""
    if listed is not None:
        return listed
    return [ANY] if settings.auth is AuthMode.NONE else []


def check_mcp_specs(specs: list[McpStdio | McpHttp], settings: Settings) -> None:
    """Raises ValueError (its message names the setting) for a server the operator has not
    allowed, in every auth mode."""
    commands = _allowed(settings.mcp_allowed_commands, settings)
    urls = _allowed(settings.mcp_allowed_urls, settings)
    for i, spec in enumerate(specs):
        where = f"mcpServers[{i}] ({spec.name!r})"
        if isinstance(spec, McpStdio):
            if ANY not in commands and spec.command not in commands:
                raise ValueError(
                    f"{where}: command {spec.command!r} is not allowed: a stdio MCP server must be "
                    "listed in AGENTD_MCP_ALLOWED_COMMANDS"
                )
            bad = [e.name for e in spec.env if _injects_code(e.name)]
            if bad:
                raise ValueError(
                    f"{where}: env {', '.join(bad)} not allowed: these would load other code into the command"
                )
        elif ANY not in urls and not url_allowed(spec.url, urls):
            raise ValueError(
                f"{where}: URL {spec.url!r} is not allowed: an HTTP MCP server must lie under a prefix in "
                "AGENTD_MCP_ALLOWED_URLS"
            )

"""Which MCP servers may be declared (issue 28, item 2): the operator's allow-lists
govern in every auth mode; unset, they allow anything without auth and nothing with
tokens; code-loading environment variables are refused in every mode."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentd.infra.config import AuthMode, Settings
from agentd.tools.mcp.client import McpHttp, McpStdio, NameValue
from agentd.tools.mcp.policy import check_mcp_specs

SH = McpStdio(name="sh", command="/bin/sh", args=["-c", "id"])
CALC = McpStdio(name="calc", command="/usr/bin/calc-mcp")
WEB = McpHttp(type="http", name="web", url="https://mcp.example.com/api/x")


def settings(tmp_path: Path, auth: AuthMode, **kw: Any) -> Settings:
    return Settings(home=tmp_path, auth=auth, **kw)


@pytest.mark.parametrize("auth", list(AuthMode))
def test_a_set_allow_list_governs_in_every_auth_mode(tmp_path: Path, auth: AuthMode) -> None:
    s = settings(
        tmp_path, auth, mcp_allowed_commands=[CALC.command], mcp_allowed_urls=["https://mcp.example.com/api"]
    )
    check_mcp_specs([CALC, WEB], s)
    with pytest.raises(ValueError, match=r"'/bin/sh' is not allowed.*AGENTD_MCP_ALLOWED_COMMANDS"):
        check_mcp_specs([CALC, SH], s)
    other = McpHttp(type="http", name="web", url="https://evil.example.com/api")
    with pytest.raises(ValueError, match="AGENTD_MCP_ALLOWED_URLS"):
        check_mcp_specs([other], s)


@pytest.mark.parametrize("auth", list(AuthMode))
def test_an_empty_list_allows_nothing_and_a_star_anything(tmp_path: Path, auth: AuthMode) -> None:
    with pytest.raises(ValueError, match="AGENTD_MCP_ALLOWED_COMMANDS"):
        check_mcp_specs([CALC], settings(tmp_path, auth, mcp_allowed_commands=[]))
    with pytest.raises(ValueError, match="AGENTD_MCP_ALLOWED_URLS"):
        check_mcp_specs([WEB], settings(tmp_path, auth, mcp_allowed_urls=[]))
    check_mcp_specs([SH, WEB], settings(tmp_path, auth, mcp_allowed_commands=["*"], mcp_allowed_urls=["*"]))


def test_unset_lists_allow_anything_without_auth_and_nothing_with_tokens(tmp_path: Path) -> None:
    check_mcp_specs([SH, WEB], settings(tmp_path, AuthMode.NONE))
    for spec in (SH, WEB):
        with pytest.raises(ValueError, match="AGENTD_MCP_ALLOWED_"):
            check_mcp_specs([spec], settings(tmp_path, AuthMode.TOKEN))


@pytest.mark.parametrize("auth", list(AuthMode))
@pytest.mark.parametrize("name", ["LD_PRELOAD", "ld_library_path", "PYTHONPATH", "NODE_OPTIONS", "BASH_ENV"])
def test_code_loading_env_is_refused_in_every_auth_mode(tmp_path: Path, auth: AuthMode, name: str) -> None:
    spec = CALC.model_copy(update={"env": [NameValue(name=name, value="/tmp/evil")]})
    with pytest.raises(ValueError, match=name):
        check_mcp_specs([spec], settings(tmp_path, auth, mcp_allowed_commands=["*"]))


def test_unsandboxed_names_are_read_comma_separated_or_as_json(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("AGENTD_MCP_UNSANDBOXED", "calc-mcp, /usr/bin/gh-mcp")
    assert Settings(home=tmp_path).mcp_unsandboxed == ["calc-mcp", "/usr/bin/gh-mcp"]
    monkeypatch.setenv("AGENTD_MCP_UNSANDBOXED", '["a,b"]')
    assert Settings(home=tmp_path).mcp_unsandboxed == ["a,b"]

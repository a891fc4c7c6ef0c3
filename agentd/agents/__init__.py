"""Agent definitions (R-M4): the static contract of an agent, its builder and its files.

- `definition.py` — `AgentDefinition` (static, shared by sessions), `DEFAULT_AGENT`, the errors;
- `builder.py` — `AgentBuilder`: collect anything, validate everything at once in `build()`;
- `fields.py` — the fields' pydantic model; its errors become the one-line `Problem`s;
- `loader.py` — `*.toml` / `*.md` definition files, `default_definitions`, `select_agent`;
- `frontmatter.py` — a Markdown definition's YAML front matter (PyYAML, safe loading, lines);
- `dialects.py` — other agent tools' files (Claude Code, opencode, Codex) in agentd's terms.

The names below are the package's public interface (what the session, the app and the tests use).
"""

from agentd.agents.builder import AgentBuilder
from agentd.agents.definition import (
    DEFAULT_AGENT,
    NAME_PATTERN,
    NAME_RE,
    AgentDefinition,
    AgentDefinitionError,
    Problem,
)
from agentd.agents.loader import (
    COMPLETION_KEYS,
    DEFINITION_SUFFIXES,
    TOP_LEVEL_KEYS,
    default_definitions,
    load_definition_file,
    load_definitions,
    select_agent,
)
from agentd.core import CompletionRequirement

__all__ = [
    "COMPLETION_KEYS",
    "DEFAULT_AGENT",
    "DEFINITION_SUFFIXES",
    "NAME_PATTERN",
    "NAME_RE",
    "TOP_LEVEL_KEYS",
    "AgentBuilder",
    "AgentDefinition",
    "AgentDefinitionError",
    "CompletionRequirement",
    "Problem",
    "default_definitions",
    "load_definition_file",
    "load_definitions",
    "select_agent",
]

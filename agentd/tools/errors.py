"""The one failure a tool raises: the model reads it as the tool result (R-T3)."""


class ToolError(Exception):
    """A failure the model should read as the tool result (R-T3): bad path, no match, ..."""

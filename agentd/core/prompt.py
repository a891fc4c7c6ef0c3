"""Turn an ACP prompt (content blocks) into the user message the model sees."""

from __future__ import annotations

from collections.abc import Sequence

from agentd.core import IMAGE_TYPES, Image
from agentd.protocol import AudioContent, EmbeddedResource, ImageContent, ResourceLink, TextContent

MAX_PROMPT_TEXT = 200_000  # chars of one block the model gets; more is cut with a marker


def _truncate(text: str) -> str:
    if len(text) <= MAX_PROMPT_TEXT:
        return text
    cut = len(text) - MAX_PROMPT_TEXT
    return text[:MAX_PROMPT_TEXT] + f"\n[... truncated {cut} characters]"


def prompt_text(
    blocks: Sequence[TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource],
) -> str:
    if len(blocks) == 1 and type(only := blocks[0]) is TextContent:  # a typed prompt: as it is
        text = only.text
        return text if len(text) <= MAX_PROMPT_TEXT else _truncate(text)
    parts: list[str] = []
    for block in blocks:
        match block:
            case TextContent(text=text):
                parts.append(text if len(text) <= MAX_PROMPT_TEXT else _truncate(text))
            case ResourceLink(uri=uri, name=name):
                parts.append(f"[resource link: {name} <{uri}>]")
            case EmbeddedResource(resource=res) if res.text is not None:
                parts.append(f'<resource uri="{res.uri}">\n{_truncate(res.text)}\n</resource>')
            case EmbeddedResource(resource=res):
                parts.append(f"[binary resource omitted: {res.uri}]")
            case ImageContent(mime_type=mime) if mime in IMAGE_TYPES:
                parts.append("[image attached]")
            case ImageContent(mime_type=mime):
                parts.append(f"[image omitted: {mime} is not a supported image type]")
            case AudioContent():
                parts.append("[audio omitted]")
    return "\n\n".join(parts)


def prompt_images(
    blocks: Sequence[TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource],
) -> list[Image]:
    """The prompt's images the model receives as images (in the provider's own format)."""
    return [
        Image(mime_type=b.mime_type, data=b.data)
        for b in blocks
        if isinstance(b, ImageContent) and b.mime_type in IMAGE_TYPES
    ]

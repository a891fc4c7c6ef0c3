"""What an MCP tool result becomes (issue 29, item 5): the text and images the model gets,
and the ACP tool-call content the client shows.

The model reads text blocks as they are, an embedded text resource inlined with its URI
(the same `<resource uri=…>` form as a prompt's embedded context), a resource link as its
name and URI, and images as images — in the provider's own format where its tool results
take images (Anthropic's `tool_result`, the Responses API's `function_call_output`);
Chat Completions' tool messages are text only, so there the text says the image went to
the user (`agentd.providers.openai`). A text blob (a `text/*` or JSON/XML type, base64) is
read as text; other binary resources and audio stay a note.

Sizes are bounded: one result's text for the model, the number and size of its images,
and the size of any block a client is sent (a bigger one becomes a note).
The blocks are the `mcp` SDK's models, read by attribute so that the SDK need not be
imported here.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

from agentd.core import IMAGE_TYPES, Image

MAX_TEXT = 200_000  # chars of one result the model reads; more is cut with a marker
MAX_IMAGES = 8  # images of one result the model gets; the rest stay a note
# Base64 chars of one image or binary block (the model's images, and any block a client
# is sent): Anthropic refuses images over 5 MB.
MAX_DATA = 5 * 1024 * 1024
MAX_RESOURCE_TEXT = MAX_TEXT  # chars of an embedded text resource a client is sent
# All of one result's images (the model's), and all of its data a client is sent (images,
# blobs, resource text): a provider refuses requests over ~32 MB, and the event log keeps
# what clients are sent.
MAX_TOTAL = 2 * MAX_DATA


@dataclass
class ModelView:
    """One MCP result as the model receives it."""

    text: str
    images: list[Image] = field(default_factory=list)


def _size(chars: int) -> str:
    """A base64 payload's decoded size, readably."""
    n = chars * 3 // 4
    if n >= 1024 * 1024:
        return f"{n / 1024 / 1024:.1f} MB"
    return f"{n / 1024:.1f} KB" if n >= 1024 else f"{n} B"


def _truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... truncated {len(text) - limit} characters]"


def _link(block: Any) -> str:
    name = getattr(block, "title", None) or getattr(block, "name", "") or ""
    mime = getattr(block, "mime_type", None)
    line = f"[resource link: {name} <{getattr(block, 'uri', '')}>{', ' + mime if mime else ''}]"
    description = getattr(block, "description", None)
    return f"{line}\n{description}" if description else line


def _is_text(mime: str) -> bool:
    return mime.startswith("text/") or mime in _TEXT_TYPES or mime.endswith(("+json", "+xml"))


_TEXT_TYPES = frozenset({"application/json", "application/xml", "application/yaml", "application/javascript"})


def _decoded(blob: str) -> str | None:
    """A text blob's UTF-8 text (None: too big to decode here, not base64, or not UTF-8)."""
    if len(blob) > MAX_DATA:
        return None
    try:
        return base64.b64decode(blob, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None


def model_view(content: list[Any]) -> ModelView:
    """The text (and images) the model reads of an MCP result."""
    parts: list[str] = []
    images: list[Image] = []

    def image(mime: str, data: str, what: str) -> str:
        if mime not in IMAGE_TYPES:
            return f"[{what} omitted: {mime or 'no type'} is not a supported image type]"
        if len(data) > MAX_DATA:
            return f"[{what} omitted: {_size(len(data))} is over the {_size(MAX_DATA)} limit]"
        if len(images) >= MAX_IMAGES:
            return f"[{what} omitted: more than {MAX_IMAGES} images in one result]"
        if len(data) + sum(len(i.data) for i in images) > MAX_TOTAL:
            return f"[{what} omitted: the result's images are over {_size(MAX_TOTAL)}]"
        images.append(Image(mime_type=mime, data=data))
        return f"[image {len(images)}: {mime}]"

    for block in content:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(str(getattr(block, "text", "")))
        elif kind == "image":
            mime, data = getattr(block, "mime_type", None) or "", getattr(block, "data", None) or ""
            parts.append(image(mime, data, "image"))
        elif kind == "resource_link":
            parts.append(_link(block))
        elif kind == "resource":
            res = getattr(block, "resource", None)
            uri = getattr(res, "uri", "")
            mime = getattr(res, "mime_type", None) or ""
            text = getattr(res, "text", None)
            blob = getattr(res, "blob", None)
            if not isinstance(text, str) and isinstance(blob, str) and _is_text(mime):
                text = _decoded(blob)  # text sent as a blob (base64) is still text
            if isinstance(text, str):
                attrs = f' uri="{uri}"' + (f' mimeType="{mime}"' if mime else "")
                parts.append(f"<resource{attrs}>\n{text}\n</resource>")
            elif isinstance(blob, str) and mime.startswith("image/"):
                parts.append(f'<resource uri="{uri}">{image(mime, blob, "image resource")}</resource>')
            else:
                size = _size(len(blob)) if isinstance(blob, str) else "no data"
                parts.append(f"[binary resource <{uri}> ({mime or 'no type'}, {size}), shown to the user]")
        elif kind == "audio":
            parts.append(f"[audio: {getattr(block, 'mime_type', '')}, shown to the user]")
        else:
            parts.append(f"[{kind or 'unknown'} content omitted]")
    return ModelView(_truncate("\n".join(parts), MAX_TEXT), images)


def _client_block(block: Any, left: int) -> tuple[dict[str, Any], int]:
    """One MCP block as an ACP content block and the chars of data it uses, or a text note
    when it is bigger than one block may be or than `left` of the result's budget."""
    dumped: dict[str, Any] = block.model_dump(by_alias=True, exclude_none=True, mode="json")
    dumped.pop("annotations", None)  # MCP annotations are not ACP's
    dumped.pop("_meta", None)
    resource = dumped.get("resource")
    if isinstance(resource, dict):
        resource.pop("_meta", None)
        if isinstance(resource.get("text"), str):
            resource["text"] = _truncate(resource["text"], MAX_RESOURCE_TEXT)
        text = resource.get("text")
        payload = resource.get("blob") or text or ""
        what = f"resource <{resource.get('uri', '')}>"
    else:
        text, payload = None, dumped.get("data") or ""
        what = str(dumped.get("type"))
    size = len(payload) if isinstance(payload, str) else 0
    if size > min(MAX_DATA, left):
        readable = f"{size} characters" if payload is text else _size(size)
        return {"type": "text", "text": f"[{what} not shown: {readable} is too big]"}, 0
    return dumped, size


def client_content(content: list[Any]) -> list[dict[str, Any]]:
    """MCP content that is more than text (images, audio, resource links, embedded
    resources) as ACP tool-call content, so the client shows the real thing."""
    out: list[dict[str, Any]] = []
    left = MAX_TOTAL
    for block in content:
        if getattr(block, "type", None) in ("image", "audio", "resource_link", "resource"):
            shown, used = _client_block(block, left)
            left -= used
            out.append({"type": "content", "content": shown})
    return out

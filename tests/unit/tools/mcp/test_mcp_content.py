"""Issue 29 item 5: what the model and the client get of an MCP tool result — embedded
text resources inlined with their URI, images as images (bounded in number and size),
the rest as notes; ACP content for the client, with oversized blocks replaced by a note."""

from __future__ import annotations

import base64

from mcp.types import (
    Annotations,
    AudioContent,
    BlobResourceContents,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from agentd.core.conversation import Image
from agentd.tools.mcp.content import MAX_DATA, MAX_IMAGES, MAX_TEXT, MAX_TOTAL, client_content, model_view

PNG = "iVBORw0KGgo="


def text_resource(uri: str, text: str, mime: str | None = "text/markdown") -> EmbeddedResource:
    return EmbeddedResource(
        type="resource", resource=TextResourceContents(uri=uri, mime_type=mime, text=text)
    )


def blob_resource(uri: str, blob: str, mime: str) -> EmbeddedResource:
    return EmbeddedResource(
        type="resource", resource=BlobResourceContents(uri=uri, mime_type=mime, blob=blob)
    )


def test_embedded_text_is_inlined_with_its_uri_and_images_become_images() -> None:
    view = model_view(
        [
            TextContent(type="text", text="found it"),
            text_resource("file:///p/NOTES.md", "# Notes\nline two"),
            ImageContent(type="image", data=PNG, mime_type="image/png"),
            blob_resource("memory://chart.jpg", "/9j/", "image/jpeg"),
            blob_resource("memory://data.bin", "AAAA", "application/octet-stream"),
            ResourceLink(type="resource_link", name="spec", uri="https://e.x/spec", description="The spec."),
            AudioContent(type="audio", data="AAAA", mime_type="audio/wav"),
        ]
    )
    assert view.text.split("\n") == [
        "found it",
        '<resource uri="file:///p/NOTES.md" mimeType="text/markdown">',
        "# Notes",
        "line two",
        "</resource>",
        "[image 1: image/png]",
        '<resource uri="memory://chart.jpg">[image 2: image/jpeg]</resource>',
        "[binary resource <memory://data.bin> (application/octet-stream, 3 B), shown to the user]",
        "[resource link: spec <https://e.x/spec>]",
        "The spec.",
        "[audio: audio/wav, shown to the user]",
    ]
    assert view.images == [Image(mime_type="image/png", data=PNG), Image(mime_type="image/jpeg", data="/9j/")]


def test_images_are_bounded_in_type_number_and_size() -> None:
    many = [ImageContent(type="image", data=PNG, mime_type="image/png") for _ in range(MAX_IMAGES + 1)]
    odd = ImageContent(type="image", data=PNG, mime_type="image/x-icon")
    huge = ImageContent(type="image", data="A" * (MAX_DATA + 4), mime_type="image/png")
    view = model_view([odd, huge, *many])
    assert len(view.images) == MAX_IMAGES
    lines = view.text.split("\n")
    assert lines[0] == "[image omitted: image/x-icon is not a supported image type]"
    assert lines[1].startswith("[image omitted: 3.8 MB is over the 3.8 MB limit")
    assert lines[-1] == f"[image omitted: more than {MAX_IMAGES} images in one result]"


def test_the_models_text_is_bounded() -> None:
    view = model_view([text_resource("file:///big", "x" * (MAX_TEXT + 10))])
    assert len(view.text) < MAX_TEXT + 100 and view.text.endswith("characters]")


def test_client_content_is_acp_blocks_and_oversized_ones_become_notes() -> None:
    blocks = client_content(
        [
            TextContent(type="text", text="plain text stays in the output"),
            ImageContent(type="image", data=PNG, mime_type="image/png", annotations=Annotations(priority=1)),
            text_resource("file:///p/NOTES.md", "notes"),
            blob_resource("memory://big.bin", "A" * (MAX_DATA + 4), "application/octet-stream"),
            ImageContent(type="image", data="A" * (MAX_DATA + 4), mime_type="image/png"),
        ]
    )
    assert [b["content"] for b in blocks] == [
        {"type": "image", "data": PNG, "mimeType": "image/png"},
        {
            "type": "resource",
            "resource": {"uri": "file:///p/NOTES.md", "mimeType": "text/markdown", "text": "notes"},
        },
        {"type": "text", "text": "[resource <memory://big.bin> not shown: 3.8 MB is too big]"},
        {"type": "text", "text": "[image not shown: 3.8 MB is too big]"},
    ]
    assert all(b["type"] == "content" for b in blocks)


def test_a_text_blob_is_read_as_text_and_a_broken_one_stays_a_note() -> None:
    hello = base64.b64encode("héllo".encode()).decode()
    view = model_view(
        [
            blob_resource("memory://a.txt", hello, "text/plain"),
            blob_resource("memory://b.json", "not base64!", "application/json"),
            blob_resource("memory://c.txt", base64.b64encode(b"\xff\xfe").decode(), "text/plain"),
        ]
    )
    assert view.text.split("\n") == [
        '<resource uri="memory://a.txt" mimeType="text/plain">',
        "héllo",
        "</resource>",
        "[binary resource <memory://b.json> (application/json, 8 B), shown to the user]",
        "[binary resource <memory://c.txt> (text/plain, 3 B), shown to the user]",
    ]


def test_one_results_images_and_client_data_are_bounded_in_total() -> None:
    big = "A" * (MAX_DATA - 4)  # each under the per-block limit
    blocks = [ImageContent(type="image", data=big, mime_type="image/png") for _ in range(3)]
    view = model_view(blocks)
    assert len(view.images) == MAX_TOTAL // MAX_DATA == 2
    assert view.text.split("\n")[-1].startswith("[image omitted: the result's images are over 7.5 MB")
    shown = [b["content"] for b in client_content([*blocks, text_resource("file:///n", "notes, more notes")])]
    assert [b["type"] for b in shown] == ["image", "image", "text", "text"]
    assert shown[2]["text"] == "[image not shown: 3.7 MB is too big]"
    assert shown[3]["text"] == "[resource <file:///n> not shown: 17 characters is too big]"

"""`web_fetch` against a real local web site (tests/support/web_site.py), reached through an
explicit operator allow entry as an operator would: HTML as markdown, redirects followed and
checked anew, the size, time and redirect limits — and a table of refused addresses, every
spelling of this host among them, which the site proves it never saw."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentd.tools.base import ToolContext
from agentd.tools.errors import ToolError
from agentd.tools.web.fetch import MAX_OUTPUT_CHARS, MAX_REDIRECTS, FetchLimits, Page, WebFetch, render
from agentd.tools.web.policy import build_fetch_policy
from tests.support.web_site import BIG_BYTES, WebSite

CTX = ToolContext(cwd=Path("/"), session_id="s")


@pytest.fixture
async def site() -> AsyncIterator[WebSite]:
    async with WebSite() as server:
        yield server


def allowed(site: WebSite, max_bytes: int = 5 << 20, timeout_s: float = 30.0) -> WebFetch:
    """The tool with the site's address:port on the operator's allow list."""
    return WebFetch(
        build_fetch_policy([f"127.0.0.1:{site.port}"], [], [8765]), FetchLimits(max_bytes, timeout_s)
    )


async def test_an_html_page_comes_back_as_markdown_without_scripts(site: WebSite) -> None:
    result = await allowed(site).run({"url": f"{site.base_url}/page"}, CTX)
    assert not result.is_error
    assert result.output.startswith(f"URL: {site.base_url}/page\nStatus: 200\n")
    assert "# Install" in result.output
    assert "Run `pip install agentd`, then read\n[the guide](/guide)." in result.output
    assert "- fast\n- durable" in result.output
    assert "secret" not in result.output and "color:red" not in result.output
    assert "menu" not in result.output  # the page's navigation
    html = "text/html; charset=utf-8"
    assert result.raw_output == {"url": f"{site.base_url}/page", "status": 200, "contentType": html}


async def test_plain_text_as_it_is_with_the_url_s_host_header(site: WebSite) -> None:
    result = await allowed(site).run({"url": f"{site.base_url}/text"}, CTX)
    assert result.output.endswith(f"plain text; host header 127.0.0.1:{site.port}")


async def test_a_redirect_is_followed_and_the_final_url_shown(site: WebSite) -> None:
    result = await allowed(site).run({"url": f"{site.base_url}/redirect?to=/page"}, CTX)
    assert result.output.startswith(f"URL: {site.base_url}/page\n")
    assert site.paths == ["/redirect", "/page"]


@pytest.mark.parametrize(
    "target",
    [
        "http://169.254.169.254/latest/meta-data/",  # cloud metadata
        "http://10.0.0.1/",
        "http://127.0.0.2:{port}/page",  # loopback, another address than the allowed one
        "http://localhost:{other}/",  # a name resolving to loopback
        "http://[::1]:{port}/page",
        "file:///etc/passwd",
    ],
)
async def test_a_redirect_to_a_refused_address_is_refused(site: WebSite, target: str) -> None:
    url = target.format(port=site.port, other=site.port + 1 if site.port < 65535 else 1)
    with pytest.raises(ToolError, match=r"not allowed|not fetched"):
        await allowed(site).run({"url": f"{site.base_url}/redirect?to={url}"}, CTX)
    assert site.paths == ["/redirect"]  # nothing after the redirect


def _refused_spellings(port: int) -> list[str]:
    return [
        f"http://127.0.0.1:{port}/page",
        f"http://localhost:{port}/page",
        f"http://2130706433:{port}/page",  # decimal
        f"http://0177.0.0.1:{port}/page",  # octal
        f"http://0x7f.0.0.1:{port}/page",  # hex
        f"http://0x7f000001:{port}/page",
        f"http://127.1:{port}/page",  # short form
        f"http://[::ffff:127.0.0.1]:{port}/page",  # v4-mapped
        f"http://[::ffff:7f00:1]:{port}/page",
        f"http://0.0.0.0:{port}/page",  # reaches this host
        f"http://0:{port}/page",
        f"http://[::]:{port}/page",
    ]


async def test_every_spelling_of_this_host_is_refused_without_an_allow_entry(site: WebSite) -> None:
    tool = WebFetch(build_fetch_policy([], [], [8765]))
    for url in _refused_spellings(site.port):
        # (httpx's URL parser already refuses the octal form as malformed: refused too.)
        with pytest.raises(ToolError, match=r"is not allowed: (loopback|this_host)|not a valid URL"):
            await tool.run({"url": url}, CTX)
    assert site.paths == []  # not one connection carried a request


async def test_the_allow_entry_is_for_its_port_only_and_the_deny_list_wins(site: WebSite) -> None:
    with socket.socket() as other:  # a second local port, listening, not on the allow list
        other.bind(("127.0.0.1", 0))
        other.listen()
        with pytest.raises(ToolError, match="not allowed: loopback"):
            await allowed(site).run({"url": f"http://127.0.0.1:{other.getsockname()[1]}/"}, CTX)
    denied = WebFetch(build_fetch_policy([f"127.0.0.1:{site.port}"], ["127.0.0.0/8"], [8765]))
    with pytest.raises(ToolError, match="not allowed: denied"):
        await denied.run({"url": f"{site.base_url}/page"}, CTX)
    by_name = WebFetch(build_fetch_policy([f"127.0.0.1:{site.port}"], ["localhost"], [8765]))
    with pytest.raises(ToolError, match="deny list"):
        await by_name.run({"url": f"http://localhost:{site.port}/page"}, CTX)
    assert site.paths == []


async def test_agentd_s_own_port_is_refused_whatever_is_allowed(site: WebSite) -> None:
    tool = WebFetch(build_fetch_policy([f"127.0.0.1:{site.port}"], [], [site.port]))
    with pytest.raises(ToolError, match="not allowed: agentd"):
        await tool.run({"url": f"{site.base_url}/page"}, CTX)
    assert site.paths == []


async def test_redirects_are_bounded(site: WebSite) -> None:
    with pytest.raises(ToolError, match=f"more than {MAX_REDIRECTS} redirects"):
        await allowed(site).run({"url": f"{site.base_url}/loop"}, CTX)
    assert site.paths == ["/loop"] * (MAX_REDIRECTS + 1)


async def test_the_body_is_cut_at_the_size_limit(site: WebSite) -> None:
    result = await allowed(site, max_bytes=1000).run({"url": f"{site.base_url}/big"}, CTX)
    assert "Note: the body was cut at the size limit" in result.output
    assert result.output.endswith("\n\n" + "x" * 1000)
    # Under the byte limit, the text the model gets has a cap of its own.
    whole = await allowed(site).run({"url": f"{site.base_url}/big"}, CTX)
    assert BIG_BYTES > MAX_OUTPUT_CHARS
    assert f"Note: the text was cut at {MAX_OUTPUT_CHARS} characters\n" in whole.output
    assert whole.output.endswith("\n\n" + "x" * MAX_OUTPUT_CHARS)


async def test_a_compressed_body_nobody_asked_for_is_refused_not_inflated(site: WebSite) -> None:
    with pytest.raises(ToolError, match="came gzip-compressed although asked not to be"):
        await allowed(site).run({"url": f"{site.base_url}/gzip"}, CTX)


async def test_a_page_that_never_answers_ends_at_the_time_limit(site: WebSite) -> None:
    with pytest.raises(ToolError, match=r"took longer than 0\.3 s"):
        await allowed(site, timeout_s=0.3).run({"url": f"{site.base_url}/hang"}, CTX)


async def test_binary_content_is_not_returned_and_an_http_error_is_an_error_result(site: WebSite) -> None:
    with pytest.raises(ToolError, match=r"image/png .* not text"):
        await allowed(site).run({"url": f"{site.base_url}/binary"}, CTX)
    missing = await allowed(site).run({"url": f"{site.base_url}/missing"}, CTX)
    assert missing.is_error and "Status: 404" in missing.output and missing.output.endswith("no such page")


@pytest.mark.parametrize("args", [{}, {"url": ""}, {"url": 7}])
async def test_a_missing_url_is_a_readable_error(args: dict[str, object]) -> None:
    with pytest.raises(ToolError, match="url: expected"):
        await WebFetch(build_fetch_policy([], [], [])).run(args, CTX)


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("http://[::1/", "not a valid URL"),
        ("http://example.com:abc/", "not a valid URL"),
        ("http://ex\x00ample.com/", "not a valid URL"),
        ("http://127.0.0.1\t/", "not a valid URL"),
        ("http://" + "a" * 70 + ".com/", "cannot resolve"),  # a label IDNA refuses: no lookup made
        ("ftp://example.com/", "only http and https"),
        ("http://user:pw@127.0.0.1/", "user name or password"),
    ],
)
async def test_a_malformed_url_is_a_readable_refusal(url: str, said: str) -> None:
    with pytest.raises(ToolError, match=said):
        await WebFetch(build_fetch_policy([], [], [])).run({"url": url}, CTX)


def test_a_huge_html_page_is_cut_before_conversion_and_says_so() -> None:
    html = "<html><body>" + "<p>word</p>" * 1000 + "</body></html>"
    page = Page("https://example.com/", 200, "text/html", html.encode(), truncated=False)
    text = render(page, html_cap=551)  # 49 paragraphs whole (12 + 49 × 11 characters)
    assert "Note: the page was cut at 551 characters before conversion\n" in text
    assert text.count("word") == 49
    assert "Note:" not in render(page)  # under the real cap: whole

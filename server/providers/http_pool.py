"""The providers' HTTP client: httpx's client on `http_lean.LeanTransport` (issue 14,
items 1 and 2), with limits for many sessions streaming at once, and cookies parsed only
when a response sets one.

httpcore 1.0's pool re-examined every connection on every request and response close, and
httpx's default limits kept only 20 connections alive (a busy server reconnected on most
turns) and allowed 100 at most (the 101st concurrent model stream waited up to the pool
timeout). `LeanTransport` keeps idle connections on a stack per origin (O(1) per request)
and runs up to `LIMITS.max_connections` exchanges at once.
"""

from __future__ import annotations

import ssl

import httpx

from server.providers.http_lean import LeanTransport

# Many sessions stream at once, each holding a connection for its whole answer: enough
# kept alive that a busy server does not reconnect per turn. An idle connection is dropped
# after 4 s, under the 5 s keep-alive timeout of common servers (uvicorn, Node): one reused
# just as the server closes it fails the request (a reset, httpx's ReadError).
LIMITS = httpx.Limits(max_connections=1000, max_keepalive_connections=256, keepalive_expiry=4.0)


def client(timeout: httpx.Timeout, verify: ssl.SSLContext) -> httpx.AsyncClient:
    """An `httpx.AsyncClient` on the lean HTTP/1.1 transport (`http_lean`)."""
    transport = LeanTransport(verify, LIMITS)
    http = httpx.AsyncClient(timeout=timeout, verify=verify, limits=LIMITS, transport=transport)
    http._cookies = _Cookies()  # (the public setter would copy into a plain `Cookies`)
    return http


class _Cookies(httpx.Cookies):
    """httpx runs every response through `http.cookiejar` (a urllib request built, the
    headers parsed), ~4 % of a trivial turn's loop CPU: only a response that sets a cookie
    is worth that (model APIs behind a CDN do, and get them back as before)."""

    def extract_cookies(self, response: httpx.Response) -> None:
        if "set-cookie" in response.headers:
            super().extract_cookies(response)

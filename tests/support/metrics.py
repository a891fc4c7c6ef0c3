"""Scraping a server's /metrics into (name, labels) -> value samples."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


async def scrape(base_url: str, **headers: str) -> dict:
    async with httpx.AsyncClient(base_url=base_url, timeout=10) as http:
        resp = await http.get("/metrics", headers=headers)
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"].startswith("text/plain")
    return samples(resp.text)

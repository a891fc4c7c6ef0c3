"""A local OTLP/HTTP trace collector: what `OTLPSpanExporter` (http/protobuf) posts to
`/v1/traces`, decoded with the official protobuf types and kept as plain spans."""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.support.fakes.threaded import ThreadedServer


@dataclass(frozen=True)
class CollectedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: dict[str, Any]
    service: str
    failed: bool
    links: tuple[tuple[str, str], ...] = ()  # (trace id, span id) of each linked span


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


class FakeCollector(ThreadedServer):
    thread_name = "fake-otlp"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spans: list[CollectedSpan] = []
        super().__init__()
        self.app = Starlette(routes=[Route("/v1/traces", self._handle, methods=["POST"])])

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def spans(self) -> list[CollectedSpan]:
        with self._lock:
            return list(self._spans)

    async def _handle(self, request: Request) -> Response:
        raw = await request.body()
        if request.headers.get("content-encoding") == "gzip":
            raw = gzip.decompress(raw)
        export = ExportTraceServiceRequest.FromString(raw)
        got = []
        for resource_spans in export.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for s in scope_spans.spans:
                    got.append(
                        CollectedSpan(
                            name=s.name,
                            trace_id=s.trace_id.hex(),
                            span_id=s.span_id.hex(),
                            parent_span_id=s.parent_span_id.hex(),
                            attributes={a.key: _value(a.value) for a in s.attributes},
                            service=str(resource.get("service.name", "")),
                            failed=s.status.code == s.status.STATUS_CODE_ERROR,
                            links=tuple((x.trace_id.hex(), x.span_id.hex()) for x in s.links),
                        )
                    )
        with self._lock:
            self._spans.extend(got)
        body = ExportTraceServiceResponse().SerializeToString()
        return Response(body, media_type="application/x-protobuf")

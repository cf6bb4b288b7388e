"""``/health``, ``/metrics`` and ``/favicon.ico``: for probes, scrapers and browsers; no key."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from serving.metrics import ServerMetrics
from serving.state import ServerState


def router(state: ServerState, metrics: ServerMetrics) -> APIRouter:
    api = APIRouter()

    @api.get("/health")
    async def health() -> JSONResponse:
        body = state.describe()
        headers = {} if state.ready else {"Retry-After": "5"}
        return JSONResponse(body, status_code=200 if state.ready else 503, headers=headers)

    @api.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> Response:
        """Browsers ask for it; "no icon" instead of a 404 in every log."""
        return Response(status_code=204, headers={"Cache-Control": "max-age=86400"})

    @api.get("/metrics")
    async def prometheus() -> Response:
        return Response(metrics.render(), media_type=metrics.content_type)

    return api

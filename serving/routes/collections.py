"""Collections and their documents as HTTP resources, and the jobs that index them: the routes.

``GET /v1/collections`` lists the collections a chat request may name; it needs only the
API key (when one is set). ``POST /v1/collections`` makes an empty collection, ``POST
.../files`` stores uploads and answers 202 with the job that indexes them
(:mod:`serving.jobs`), ``GET .../files`` lists the documents with their state, ``DELETE
.../files/ID`` removes one (a job rebuilds the collection without it), ``GET /v1/jobs/ID``
(and ``/events``, server-sent) follows a job. These are off unless ``server.api_key`` is
set (then only with the key) or ``documents.uploads`` is ``on``: uploads write files and
start work on the server.

The work lives in the modules named for it: :mod:`serving.upload_form` (the multipart
form within its limits), :mod:`serving.uploads` (each file's checks and storage),
:mod:`serving.lookups` (the collection or job a request names), :mod:`serving.file_states`
(each document's state), :mod:`serving.collection_cards` (``GET /v1/collections``) and
:mod:`serving.documents_openapi` (these routes in the OpenAPI document).
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.datastructures import UploadFile

from serving import errors, uploads
from serving.collection_cards import collection_cards
from serving.errors import APIError
from serving.file_states import file_states
from serving.jobs import TERMINAL, Job, JobQueue
from serving.lookups import checked_name, exists, job_of, known_collection, uploads_of
from serving.streams import DONE, KEEPALIVE
from serving.upload_form import files_of, read_form
from serving.validation import decode_json, read_body
from typed_rag.config import Settings
from typed_rag.retrieval.collections import uploads_dir

EVENTS_POLL_S = 0.25


def enabled(settings: Settings) -> bool:
    """Whether the documents API answers: ``on``, or ``auto`` with an API key set
    (``DocumentSettings.uploads_with``; resolved settings hold it)."""
    return settings.documents.uploads_with(settings.server.api_key) == "on"


def router(settings: Settings, jobs: JobQueue, require_key: Callable[..., Any]) -> APIRouter:
    api = APIRouter()

    @api.get("/v1/collections", dependencies=[Depends(require_key)])
    async def collections() -> JSONResponse:
        """The collections a request's ``collection`` field may name."""
        cards = await asyncio.to_thread(collection_cards, settings)
        return JSONResponse({"object": "list", "data": cards})

    async def require_enabled(request: Request) -> None:
        if not enabled(settings):
            raise APIError(
                403,
                "the documents API is off: set server.api_key (its requests then need the "
                'key) or documents.uploads = "on"',
                type="permission_error",
                code="documents_api_off",
            )
        await require_key(request)

    guard = [Depends(require_enabled)]

    @api.post("/v1/collections", dependencies=guard, status_code=201)
    async def create_collection(request: Request) -> JSONResponse:
        """Make an empty collection; files are uploaded into it next."""
        body = decode_json(await read_body(request, settings.server.max_body_bytes), 8)
        name = body.get("name") if isinstance(body, dict) else None
        if not isinstance(name, str):
            raise errors.bad_request(
                'send {"name": NAME}: the collection\'s name', param="name", code="invalid_value"
            )
        checked_name(name)
        if exists(settings, name):
            raise APIError(409, f"collection {name!r} exists already", param="name",
                           code="collection_exists")  # fmt: skip
        uploads_dir(settings, name).mkdir(parents=True)
        card = next(c for c in collection_cards(settings) if c["id"] == name)
        return JSONResponse(card, status_code=201)

    @api.delete("/v1/collections/{name}", dependencies=guard)
    async def delete_collection(name: str) -> JSONResponse:
        """Delete the collection's index and uploaded files (never files elsewhere)."""
        known_collection(settings, name)
        await jobs.cancel_collection(name, "the collection was deleted")
        rc, message = await jobs.delete_index(name)
        if rc != 0:
            raise APIError(409, message or f"collection {name!r} could not be deleted",
                           code="conflict")  # fmt: skip
        folder = uploads_dir(settings, name)
        await asyncio.to_thread(shutil.rmtree, folder, True)
        return JSONResponse({"id": name, "object": "collection.deleted", "deleted": True})

    @api.post("/v1/collections/{name}/files", dependencies=guard, status_code=202)
    async def upload_files(name: str, request: Request) -> JSONResponse:
        """Store the uploads and answer at once with the job that indexes them."""
        folder = uploads_of(settings, name)
        form = await read_form(request, settings)
        try:
            return await _store_and_submit(name, folder, files_of(form))
        finally:
            await form.close()  # the spooled uploads, whatever was refused

    async def _store_and_submit(name: str, folder: Path, files: list[UploadFile]) -> JSONResponse:
        seen: set[str] = set()
        checked: list[tuple[str, UploadFile]] = []
        existing_files = uploads.stored_files(folder)
        present = {f.filename for f in existing_files}
        for upload in files:
            filename = uploads.check_filename(uploads.sent_filename(upload), seen)
            uploads.check_type(filename)
            if filename in present:
                raise errors.bad_request(
                    f"a file named {filename!r} is already in collection {name!r}; delete it "
                    f"first (DELETE /v1/collections/{name}/files/{uploads.file_id(filename)})",
                    param="files",
                    code="duplicate_file",
                )
            checked.append((filename, upload))
        uploads.check_sizes(settings, checked, existing_files)
        stored = await uploads.store(folder, checked)
        job = jobs.submit(name, "add", [f.filename for f in stored])
        body = job.to_json()
        body["uploaded"] = [uploads.file_card(f, "queued", collection=name) for f in stored]
        return JSONResponse(body, status_code=202, headers={"Location": f"/v1/jobs/{job.id}"})

    @api.get("/v1/collections/{name}/files", dependencies=guard)
    async def list_files(name: str) -> JSONResponse:
        """The collection's documents with their state, pages and passages."""
        known_collection(settings, name)
        cards = await asyncio.to_thread(file_states, settings, name, jobs.of_collection(name))
        return JSONResponse({"object": "list", "data": cards})

    @api.delete("/v1/collections/{name}/files/{file_id}", dependencies=guard, status_code=202)
    async def delete_file(name: str, file_id: str) -> JSONResponse:
        """Remove the file; a job rebuilds the collection without its passages."""
        folder = uploads_of(settings, name)
        found = uploads.find_file(folder, file_id)
        if found is None:
            raise errors.not_found(f"no file {file_id!r} in collection {name!r}")
        (folder / found.filename).unlink(missing_ok=True)
        job = jobs.submit(name, "remove", [found.filename])
        body = {"id": found.id, "object": "file", "filename": found.filename,
                "deleted": True, "job": job.to_json()}  # fmt: skip
        return JSONResponse(body, status_code=202, headers={"Location": f"/v1/jobs/{job.id}"})

    @api.get("/v1/jobs", dependencies=guard)
    async def list_jobs(collection: str | None = None) -> JSONResponse:
        """Every job (or one collection's), newest first."""
        chosen = [j for j in jobs.jobs.values() if collection in (None, j.collection)]
        chosen.sort(key=lambda j: j.created_at, reverse=True)
        return JSONResponse({"object": "list", "data": [j.to_json() for j in chosen]})

    @api.get("/v1/jobs/{job_id}", dependencies=guard)
    async def get_job(job_id: str) -> JSONResponse:
        return JSONResponse(job_of(jobs, job_id).to_json())

    @api.get("/v1/jobs/{job_id}/events", dependencies=guard)
    async def job_events(job_id: str) -> Response:
        """The job as server-sent events, one per change, until it ends; then ``[DONE]``."""
        job = job_of(jobs, job_id)
        keepalive = settings.server.sse_keepalive_s
        return StreamingResponse(
            _events(job, keepalive),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    return api


async def _events(job: Job, keepalive_s: float) -> AsyncIterator[str]:
    loop = asyncio.get_running_loop()
    shown, quiet_since = -1, loop.time()
    while True:
        if job.revision != shown:
            shown, quiet_since = job.revision, loop.time()
            yield f"data: {json.dumps(job.to_json(), ensure_ascii=False)}\n\n"
            if job.status in TERMINAL:
                yield DONE
                return
        elif loop.time() - quiet_since >= keepalive_s:
            quiet_since = loop.time()
            yield KEEPALIVE
        await asyncio.sleep(EVENTS_POLL_S)

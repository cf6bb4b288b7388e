"""Collections and their documents as HTTP resources, and the jobs that index them.

``POST /v1/collections`` makes an empty collection, ``POST .../files`` stores uploads and
answers 202 with the job that indexes them (:mod:`serving.jobs`), ``GET .../files`` lists
the documents with their state, ``DELETE .../files/ID`` removes one (a job rebuilds the
collection without it), ``GET /v1/jobs/ID`` (and ``/events``, server-sent) follows a job.
Off unless ``server.api_key`` is set (then only with the key) or ``documents.uploads`` is
``on``: uploads write files and start work on the server.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.datastructures import FormData, UploadFile
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from serving import errors, uploads
from serving.errors import APIError
from serving.jobs import TERMINAL, Job, JobQueue
from serving.paths import display_roots
from serving.streams import DONE, KEEPALIVE
from serving.validation import decode_json, read_body
from typed_rag.config import Settings
from typed_rag.errors import UserError
from typed_rag.retrieval.collections import (
    COLLECTION_KEY,
    WIKI,
    CollectionInfo,
    check_name,
    collection_dir,
    list_collections,
    uploads_dir,
)
from typed_rag.retrieval.manifest import read_manifest

EVENTS_POLL_S = 0.25


def enabled(settings: Settings) -> bool:
    """Whether the documents API answers: ``on``, or ``auto`` with an API key set."""
    mode = settings.documents.uploads
    return mode == "on" or (mode == "auto" and bool(settings.server.api_key))


def collection_cards(settings: Settings) -> list[dict[str, Any]]:
    """``GET /v1/collections``: the built collections and the empty ones made over HTTP,
    with no server path (roots by name; an uploaded collection's one root is its own)."""
    infos = list_collections(settings)
    cards = [_card(settings, info) for info in infos]
    known = {info.name for info in infos}
    root = settings.home / "uploads"
    if root.is_dir():
        for folder in sorted(root.iterdir()):
            if folder.is_dir() and folder.name not in known and _valid_name(folder.name):
                files = uploads.stored_files(folder)
                cards.append(
                    {
                        "id": folder.name,
                        "object": "collection",
                        "name": folder.name,
                        "kind": "documents",
                        "built": False,
                        "passages": 0,
                        "files": len(files),
                        "skipped": 0,
                        "roots": [],
                        "updated": None,
                        "dense": [],
                        "search": "bm25",
                        "uploads": True,
                    }  # fmt: skip
                )
    return cards


def _card(settings: Settings, info: CollectionInfo) -> dict[str, Any]:
    card = info.to_dict()
    card.pop("folder", None)
    managed = info.name != WIKI and uploads_dir(settings, info.name).is_dir()
    card["roots"] = [] if managed else display_roots(info.roots)
    card["uploads"] = managed
    return {"id": info.name, "object": "collection", **card}


def _valid_name(name: str) -> bool:
    try:
        check_name(name)
    except UserError:
        return False
    return True


def install(
    app: FastAPI, settings: Settings, jobs: JobQueue, require_key: Callable[..., Any]
) -> None:
    """Add the documents API's routes to ``app``."""

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

    @app.post("/v1/collections", dependencies=guard, status_code=201)
    async def create_collection(request: Request) -> JSONResponse:
        """Make an empty collection; files are uploaded into it next."""
        body = decode_json(await read_body(request, settings.server.max_body_bytes), 8)
        name = body.get("name") if isinstance(body, dict) else None
        if not isinstance(name, str):
            raise errors.bad_request(
                'send {"name": NAME}: the collection\'s name', param="name", code="invalid_value"
            )
        _name(name)
        if _exists(settings, name):
            raise APIError(409, f"collection {name!r} exists already", param="name",
                           code="collection_exists")  # fmt: skip
        uploads_dir(settings, name).mkdir(parents=True)
        card = next(c for c in collection_cards(settings) if c["id"] == name)
        return JSONResponse(card, status_code=201)

    @app.delete("/v1/collections/{name}", dependencies=guard)
    async def delete_collection(name: str) -> JSONResponse:
        """Delete the collection's index and uploaded files (never files elsewhere)."""
        _name(name)
        if not _exists(settings, name):
            raise _no_collection(name)
        await jobs.cancel_collection(name, "the collection was deleted")
        rc, message = await jobs.delete_index(name)
        if rc != 0:
            raise APIError(409, message or f"collection {name!r} could not be deleted",
                           code="conflict")  # fmt: skip
        folder = uploads_dir(settings, name)
        await asyncio.to_thread(shutil.rmtree, folder, True)
        return JSONResponse({"id": name, "object": "collection.deleted", "deleted": True})

    @app.post("/v1/collections/{name}/files", dependencies=guard, status_code=202)
    async def upload_files(name: str, request: Request) -> JSONResponse:
        """Store the uploads and answer at once with the job that indexes them."""
        folder = _uploads_of(settings, name)
        form = await _read_form(request, settings)
        try:
            return await _store_and_submit(name, folder, _files_of(form))
        finally:
            await form.close()  # the spooled uploads, whatever was refused

    async def _store_and_submit(name: str, folder: Path, files: list[UploadFile]) -> JSONResponse:
        seen: set[str] = set()
        checked: list[tuple[str, UploadFile]] = []
        existing = uploads.stored_files(folder)
        present = {f.filename for f in existing}
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
        uploads.check_sizes(settings, checked, existing)
        stored = await uploads.store(folder, checked)
        job = jobs.submit(name, "add", [f.filename for f in stored])
        body = job.to_json()
        body["uploaded"] = [uploads.file_card(f, "queued", collection=name) for f in stored]
        return JSONResponse(body, status_code=202, headers={"Location": f"/v1/jobs/{job.id}"})

    @app.get("/v1/collections/{name}/files", dependencies=guard)
    async def list_files(name: str) -> JSONResponse:
        """The collection's documents with their state, pages and passages."""
        _name(name)
        if not _exists(settings, name):
            raise _no_collection(name)
        cards = await asyncio.to_thread(file_states, settings, name, jobs.of_collection(name))
        return JSONResponse({"object": "list", "data": cards})

    @app.delete("/v1/collections/{name}/files/{file_id}", dependencies=guard, status_code=202)
    async def delete_file(name: str, file_id: str) -> JSONResponse:
        """Remove the file; a job rebuilds the collection without its passages."""
        folder = _uploads_of(settings, name)
        found = uploads.find_file(folder, file_id)
        if found is None:
            raise errors.not_found(f"no file {file_id!r} in collection {name!r}")
        (folder / found.filename).unlink(missing_ok=True)
        job = jobs.submit(name, "remove", [found.filename])
        body = {"id": found.id, "object": "file", "filename": found.filename,
                "deleted": True, "job": job.to_json()}  # fmt: skip
        return JSONResponse(body, status_code=202, headers={"Location": f"/v1/jobs/{job.id}"})

    @app.get("/v1/jobs", dependencies=guard)
    async def list_jobs(collection: str | None = None) -> JSONResponse:
        """Every job (or one collection's), newest first."""
        chosen = [j for j in jobs.jobs.values() if collection in (None, j.collection)]
        chosen.sort(key=lambda j: j.created_at, reverse=True)
        return JSONResponse({"object": "list", "data": [j.to_json() for j in chosen]})

    @app.get("/v1/jobs/{job_id}", dependencies=guard)
    async def get_job(job_id: str) -> JSONResponse:
        return JSONResponse(_job(jobs, job_id).to_json())

    @app.get("/v1/jobs/{job_id}/events", dependencies=guard)
    async def job_events(job_id: str) -> Response:
        """The job as server-sent events, one per change, until it ends; then ``[DONE]``."""
        job = _job(jobs, job_id)
        keepalive = settings.server.sse_keepalive_s
        return StreamingResponse(
            _events(job, keepalive),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )


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


def file_states(settings: Settings, name: str, jobs: list[Job]) -> list[dict[str, Any]]:
    """Each uploaded file (or, for a collection built on the server, each indexed file)
    with its state: what the index holds, else what its jobs say."""
    folder = uploads_dir(settings, name)
    section = (read_manifest(collection_dir(settings, name)) or {}).get(COLLECTION_KEY) or {}
    indexed: dict[str, dict[str, Any]] = section.get("files", {})
    skipped = {str(r.get("path")): r for r in section.get("skipped", [])}
    running = next((j for j in jobs if j.status == "running"), None)
    queued = any(j.status == "queued" for j in jobs)
    finished = [j for j in jobs if j.status in TERMINAL]
    if not folder.is_dir():  # built with `typed-rag index build`: shown, never changed here
        return [_server_file(path, rec, section) for path, rec in indexed.items()]
    out: list[dict[str, Any]] = []
    for f in uploads.stored_files(folder):
        path = os.path.abspath(folder / f.filename)
        rec, skip = indexed.get(path), skipped.get(path)
        if rec is not None and (rec.get("size"), rec.get("mtime_ns")) == (f.bytes, f.mtime_ns):
            info = {"pages": rec.get("pages"), "passages": rec.get("passages")}
            out.append(uploads.file_card(f, "indexed", info, name))
        elif skip is not None and skip.get("size") == f.bytes:
            out.append(uploads.file_card(f, "skipped", {"reason": skip.get("reason")}, name))
        elif running is not None:
            out.append(uploads.file_card(f, "indexing", None, name))
        elif queued:
            out.append(uploads.file_card(f, "queued", None, name))
        else:
            out.append(_after_jobs(f, finished, name))
    return out


def _after_jobs(f: uploads.StoredFile, finished: list[Job], name: str) -> dict[str, Any]:
    """A file the index does not hold and no job will read: why, from the last job."""
    for job in reversed(finished):
        outcome = job.outcomes.get(f.filename)
        if outcome and outcome.get("state") == "skipped":
            return uploads.file_card(f, "skipped", {"reason": outcome.get("reason")}, name)
        if job.status == "failed" and (f.filename in job.files or job.outcomes):
            reason = f"{job.error} ({job.id}); the collection's next job reads it again"
            return uploads.file_card(f, "failed", {"reason": reason}, name)
    reason = "no job indexed it (the server stopped first?); delete it and upload it again"
    return uploads.file_card(f, "failed", {"reason": reason}, name)


def _server_file(path: str, rec: dict[str, Any], section: dict[str, Any]) -> dict[str, Any]:
    roots = [str(r) for r in section.get("roots", [])]
    shown = os.path.basename(path)
    for root in roots:
        if path.startswith(root.rstrip(os.sep) + os.sep):
            shown = os.path.relpath(path, root)
            if len(roots) > 1:
                shown = os.path.join(os.path.basename(root.rstrip(os.sep)), shown)
            break
    f = uploads.StoredFile(uploads.file_id(shown), shown, int(rec.get("size", 0)), 0,
                           int(rec.get("mtime_ns", 0)))  # fmt: skip
    info = {"pages": rec.get("pages"), "passages": rec.get("passages")}
    card = uploads.file_card(f, "indexed", info)
    card["created_at"] = int(f.mtime_ns // 1_000_000_000)
    return card


# -- checks ---------------------------------------------------------------------


def _name(name: str) -> str:
    if name == WIKI:
        raise errors.bad_request(
            f"{WIKI!r} is the Wikipedia collection; its documents are not managed here",
            param="name",
            code="invalid_value",
        )
    try:
        return check_name(name)
    except UserError as exc:
        raise errors.bad_request(str(exc), param="name", code="invalid_value") from None


def _exists(settings: Settings, name: str) -> bool:
    folder = collection_dir(settings, name)
    return uploads_dir(settings, name).is_dir() or folder.is_symlink() or folder.exists()


def _no_collection(name: str) -> APIError:
    return errors.not_found(
        f'no collection {name!r}; make it with POST /v1/collections {{"name": "{name}"}}'
    )


def _uploads_of(settings: Settings, name: str) -> Path:
    """The upload folder of collection ``name``: 404 if there is no such collection, 409
    if it was built on the server from its own folders (its files are managed there)."""
    _name(name)
    folder = uploads_dir(settings, name)
    if folder.is_dir():
        return folder
    if _exists(settings, name):
        raise APIError(
            409,
            f"collection {name!r} was built on the server from its own folders (`typed-rag "
            "index build --docs`); its files are changed there, not over HTTP",
            code="conflict",
        )
    raise _no_collection(name)


def _job(jobs: JobQueue, job_id: str) -> Job:
    job = jobs.get(job_id)
    if job is None:
        raise errors.not_found(f"no job {job_id!r}")
    return job


async def _read_form(request: Request, settings: Settings) -> FormData:
    """The request's multipart form, within the size limits."""
    content_type = request.headers.get("content-type", "")
    if content_type.split(";")[0].strip().lower() != "multipart/form-data":
        raise APIError(
            415,
            f"expected Content-Type: multipart/form-data (files in fields named 'files'), "
            f"got {content_type.split(';')[0] or 'none'!r}",
            code="invalid_content_type",
        )
    limit = uploads.request_limit(settings)
    too_large = APIError(
        413,
        f"the upload is larger than {limit / uploads.MB:g} MB: at most "
        f"{uploads.MAX_FILES_PER_REQUEST} files of {settings.documents.max_file_mb:g} MB "
        "(documents.max_file_mb) per request",
        code="request_too_large",
    )
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_large
    _limit_stream(request, limit, too_large)
    try:
        form = await request.form(
            max_files=uploads.MAX_FILES_PER_REQUEST, max_fields=uploads.MAX_FILES_PER_REQUEST
        )
    except StarletteHTTPException as exc:
        detail = str(exc.detail)
        if detail.startswith("Too many files"):
            raise errors.bad_request(
                f"too many files in one request: at most {uploads.MAX_FILES_PER_REQUEST}; "
                "send the rest in another",
                code="too_many_files",
                param="files",
            ) from None
        raise errors.bad_request(f"invalid multipart body: {detail}", code="invalid_body") from None
    except ClientDisconnect:
        raise errors.bad_request(
            "the client disconnected before sending the whole body", code="incomplete_body"
        ) from None
    return form


def _files_of(form: FormData) -> list[UploadFile]:
    """The form's file parts (field ``files``, or ``file``); a 400 without any."""
    files: list[UploadFile] = []
    for key, value in form.multi_items():
        if isinstance(value, UploadFile):
            if key not in ("files", "file"):
                raise errors.bad_request(
                    f"file part {key!r}: send files in fields named 'files'", param=key
                )
            files.append(value)
    if not files:
        raise errors.bad_request(
            "no files: send them as multipart/form-data parts named 'files' "
            "(curl -F files=@manual.pdf)",
            param="files",
            code="invalid_value",
        )
    return files


def _limit_stream(request: Request, limit: int, error: APIError) -> None:
    """Refuse (413) a body that grows past ``limit`` while it is read, whatever it declared
    (chunked bodies declare nothing): the form parser reads through ``request._receive``."""
    receive = request._receive
    seen = 0

    async def counted() -> dict[str, Any]:
        nonlocal seen
        message = await receive()
        if message.get("type") == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                raise error
        return message

    request._receive = counted  # type: ignore[method-assign]


# -- the OpenAPI document ------------------------------------------------------------

OBJECT = {"type": "object", "additionalProperties": True}
# (path, method) -> (success status, its description, the error statuses)
ROUTES: dict[tuple[str, str], tuple[int, str, tuple[int, ...]]] = {
    ("/v1/collections", "post"): (201, "the new, empty collection", (400, 409, 413)),
    ("/v1/collections/{name}", "delete"): (200, "deleted", (400, 404, 409)),
    ("/v1/collections/{name}/files", "post"): (
        202,
        "stored; the job that indexes them (Location: /v1/jobs/ID)",
        (400, 404, 409, 413, 415),
    ),  # fmt: skip
    ("/v1/collections/{name}/files", "get"): (200, "the documents and their state", (400, 404)),
    ("/v1/collections/{name}/files/{file_id}", "delete"): (
        202,
        "removed; the job that rebuilds the collection",
        (400, 404, 409),
    ),  # fmt: skip
    ("/v1/jobs", "get"): (200, "the jobs, newest first", ()),
    ("/v1/jobs/{job_id}", "get"): (200, "the job", (404,)),
    ("/v1/jobs/{job_id}/events", "get"): (200, "the job as server-sent events", (404,)),
}
ERRORS = {
    400: "a bad name, file name or body (`param` names it)",
    401: "the Bearer key is missing or wrong",
    403: "the documents API is off (`documents.uploads`, `server.api_key`)",
    404: "no such collection, file or job",
    409: "the collection exists, is built on the server, or is being built",
    413: "a file, the request or the collection over its limit (the message names it)",
    415: "not multipart/form-data, or a file type that is not indexed",
}


def describe(doc: dict[str, Any], error_response: dict[str, Any], *, auth: bool) -> None:
    """Document the routes above as they answer (FastAPI would say 422, never sent)."""
    for (path, method), (status, what, codes) in ROUTES.items():
        op = doc["paths"][path][method]
        statuses = sorted({*codes, 403, *((401,) if auth else ())})
        content: dict[str, Any] = {"application/json": {"schema": OBJECT}}
        if path.endswith("/events"):
            content = {"text/event-stream": {"schema": {"type": "string"}}}
        op["responses"] = {
            str(status): {"description": what, "content": content},
            **{str(s): {"description": ERRORS[s], "content": error_response} for s in statuses},
        }
        for param in op.get("parameters", []):
            if param.get("name") == "name" and param.get("in") == "path":
                param["schema"] = NAME_SCHEMA
    create = doc["paths"]["/v1/collections"]["post"]
    create["requestBody"] = {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "properties": {"name": NAME_SCHEMA},
                    "required": ["name"],
                }
            }
        },
    }
    upload = doc["paths"]["/v1/collections/{name}/files"]["post"]
    upload["requestBody"] = {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "files": {
                            "type": "array",
                            "items": {"type": "string", "format": "binary"},
                            "minItems": 1,
                            "maxItems": uploads.MAX_FILES_PER_REQUEST,
                        }
                    },
                    "required": ["files"],
                },
                "encoding": {"files": {"contentType": ", ".join(UPLOAD_MEDIA_TYPES)}},
            }
        },
    }
    schemas = doc.get("components", {}).get("schemas", {})
    if "422" not in json.dumps(doc["paths"]):
        schemas.pop("HTTPValidationError", None)
        schemas.pop("ValidationError", None)


# The media types of the file types the build reads (the file name's extension decides).
UPLOAD_MEDIA_TYPES = ("application/pdf", "text/markdown", "text/plain", "text/html")
# What typed_rag.retrieval.collections.check_name takes (and not the Wikipedia's name).
NAME_SCHEMA: dict[str, Any] = {
    "type": "string",
    "pattern": "^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$",
    "not": {"anyOf": [{"const": WIKI}, {"pattern": "[.][.]"}]},
}

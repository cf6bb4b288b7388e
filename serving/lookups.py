"""What a documents request names (a collection, its upload folder, a job): found, or the
400, 404 or 409 that says why not."""

from __future__ import annotations

from pathlib import Path

from serving import errors
from serving.errors import APIError
from serving.jobs import Job, JobQueue
from typed_rag.config import Settings
from typed_rag.errors import UserError
from typed_rag.retrieval.collections import WIKI, check_name, collection_dir, uploads_dir


def checked_name(name: str) -> str:
    """``name`` if it can name a collection managed here; a 400 if not (``wiki`` neither)."""
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


def exists(settings: Settings, name: str) -> bool:
    """Whether collection ``name`` exists: made over HTTP, or built (a link or a folder)."""
    folder = collection_dir(settings, name)
    return uploads_dir(settings, name).is_dir() or folder.is_symlink() or folder.exists()


def no_collection(name: str) -> APIError:
    return errors.not_found(
        f'no collection {name!r}; make it with POST /v1/collections {{"name": "{name}"}}'
    )


def known_collection(settings: Settings, name: str) -> str:
    """``name`` of a collection that exists; a 400 or 404 if not."""
    checked_name(name)
    if not exists(settings, name):
        raise no_collection(name)
    return name


def uploads_of(settings: Settings, name: str) -> Path:
    """The upload folder of collection ``name``: 404 if there is no such collection, 409
    if it was built on the server from its own folders (its files are managed there)."""
    checked_name(name)
    folder = uploads_dir(settings, name)
    if folder.is_dir():
        return folder
    if exists(settings, name):
        raise APIError(
            409,
            f"collection {name!r} was built on the server from its own folders (`typed-rag "
            "index build --docs`); its files are changed there, not over HTTP",
            code="conflict",
        )
    raise no_collection(name)


def job_of(jobs: JobQueue, job_id: str) -> Job:
    job = jobs.get(job_id)
    if job is None:
        raise errors.not_found(f"no job {job_id!r}")
    return job

"""A collection's uploaded files: the checks an upload passes, where files go, their state.

Uploads into collection NAME live in ``<home>/uploads/NAME/`` (flat: one folder, the
build's one root). A file is written under a hidden name first and renamed into place, so
a build that runs meanwhile never reads half a file (hidden files are not read). Every
check runs before anything is written, and each refusal says what was wrong and which
limit it broke.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.datastructures import UploadFile

from serving import errors
from serving.errors import APIError
from typed_rag.config import Settings
from typed_rag.retrieval.collections import DOCUMENT_SUFFIXES

MAX_FILES_PER_REQUEST = 20  # more files: another request (a constant: see docs/serving.md)
MAX_NAME_BYTES = 255  # the longest file name Linux file systems take
MB = 1_000_000


@dataclass(frozen=True)
class StoredFile:
    """One uploaded file as the API shows it."""

    id: str
    filename: str
    bytes: int
    created_at: int
    mtime_ns: int


def file_id(filename: str) -> str:
    """A stable id from the name (names are unique in a collection): no registry to lose."""
    return "file-" + hashlib.sha256(filename.encode("utf-8")).hexdigest()[:24]


def stored_files(folder: Path) -> list[StoredFile]:
    """The files uploaded into ``folder``, by name (hidden staging files are not listed)."""
    out: list[StoredFile] = []
    if not folder.is_dir():
        return out
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if entry.name.startswith(".") or not entry.is_file(follow_symlinks=False):
            continue
        st = entry.stat(follow_symlinks=False)
        out.append(
            StoredFile(
                file_id(entry.name), entry.name, st.st_size, int(st.st_mtime), st.st_mtime_ns
            )
        )
    return out


def find_file(folder: Path, ref: str) -> StoredFile | None:
    """The file whose id (or, for curl's sake, whose name) is ``ref``."""
    for f in stored_files(folder):
        if ref in (f.id, f.filename):
            return f
    return None


def sent_filename(upload: UploadFile) -> str | None:
    """The file name as the client sent it. The multipart parser keeps only what follows
    the last backslash (old browsers sent Windows paths); such a name is refused here."""
    raw = upload.headers.get("content-disposition", "")
    found = re.search(r'filename="([^"]*)"', raw)
    if found and "\\" in found.group(1):
        return found.group(1)
    return upload.filename


def check_filename(name: str | None, seen: set[str]) -> str:
    """``name`` if it can be a file in the upload folder; a 400 naming the problem if not."""
    if not name or not name.strip():
        raise _bad_name("a file part has no file name; send it as filename=NAME")
    shown = repr(name[:80] + ("..." if len(name) > 80 else ""))
    if "\x00" in name:
        raise _bad_name(f"file name {shown} contains a NUL byte")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise _bad_name(f"file name {shown} contains a control character")
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        raise _bad_name(f"file name {shown} is an absolute path; send the file's name only")
    if "/" in name or "\\" in name or name in (".", ".."):
        raise _bad_name(
            f"file name {shown} is a path ('/', '\\\\' or '..'); send the file's name only"
        )
    if name.startswith("."):
        raise _bad_name(f"file name {shown} starts with '.': hidden files are not indexed")
    size = len(name.encode("utf-8"))
    if size > MAX_NAME_BYTES:
        raise _bad_name(f"file name {shown} is too long: {size} bytes, at most {MAX_NAME_BYTES}")
    if name in seen:
        raise _bad_name(f"file name {shown} is given twice in this request", code="duplicate_file")
    seen.add(name)
    return name


def check_type(name: str) -> None:
    """415 unless the indexer reads files of this type."""
    suffix = os.path.splitext(name)[1].lower()
    if suffix not in DOCUMENT_SUFFIXES:
        what = f"type {suffix!r}" if suffix else "no type (no extension)"
        raise APIError(
            415,
            f"file {name!r} has {what}, which is not indexed; allowed: "
            + ", ".join(DOCUMENT_SUFFIXES),
            code="unsupported_file_type",
            param="files",
        )


def check_sizes(
    settings: Settings, uploads: list[tuple[str, UploadFile]], existing: list[StoredFile]
) -> None:
    """400 for an empty file (nothing to index); 413 for a file over
    ``documents.max_file_mb`` or a collection over ``documents.max_collection_mb``."""
    limits = settings.documents
    for name, upload in uploads:
        size = upload.size or 0
        if size == 0:
            raise errors.bad_request(
                f"file {name!r} is empty (0 bytes): nothing to index", param="files",
                code="empty_file",
            )  # fmt: skip
        if size > limits.max_file_mb * MB:
            raise _too_large(
                f"file {name!r} is {size / MB:.1f} MB, over the limit of "
                f"{limits.max_file_mb:g} MB per file (documents.max_file_mb)"
            )
    total = sum(f.bytes for f in existing) + sum(u.size or 0 for _, u in uploads)
    if total > limits.max_collection_mb * MB:
        raise _too_large(
            f"the collection would hold {total / MB:.1f} MB of files, over the limit of "
            f"{limits.max_collection_mb:g} MB (documents.max_collection_mb); delete files first"
        )


def request_limit(settings: Settings) -> int:
    """The most bytes an upload request may send: every file at its limit, and headers."""
    return int(MAX_FILES_PER_REQUEST * settings.documents.max_file_mb * MB) + MB


async def store(folder: Path, uploads: list[tuple[str, UploadFile]]) -> list[StoredFile]:
    """Write the checked ``uploads`` into ``folder``: each under a hidden name, then renamed."""
    staging = folder / f".incoming-{uuid.uuid4().hex}"
    staging.mkdir(parents=True)
    try:
        for name, upload in uploads:
            await upload.seek(0)
            with (staging / name).open("wb") as out:
                while chunk := await upload.read(1 << 20):
                    out.write(chunk)
        for name, _ in uploads:
            os.replace(staging / name, folder / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    stored = {f.filename: f for f in stored_files(folder)}
    return [stored[name] for name, _ in uploads if name in stored]


def file_card(
    f: StoredFile, state: str, info: dict[str, Any] | None = None, collection: str = ""
) -> dict[str, Any]:
    """A file as ``GET /v1/collections/NAME/files`` shows it."""
    info = info or {}
    return {
        "id": f.id,
        "object": "file",
        "filename": f.filename,
        "collection": collection,
        "bytes": f.bytes,
        "created_at": f.created_at,
        "state": state,
        "reason": info.get("reason"),
        "pages": info.get("pages"),
        "passages": info.get("passages"),
    }


def _bad_name(message: str, code: str = "invalid_file_name") -> APIError:
    return errors.bad_request(message, param="files", code=code)


def _too_large(message: str) -> APIError:
    return APIError(413, message, code="request_too_large", param="files")

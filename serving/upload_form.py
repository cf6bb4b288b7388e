"""An upload request's multipart form, read within its limits: the files it carries, or
the 400, 413 or 415 that names what is wrong, before anything is written."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from starlette.datastructures import FormData, UploadFile
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from serving import errors, uploads
from serving.errors import APIError
from typed_rag.config import Settings


async def read_form(request: Request, settings: Settings) -> FormData:
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


def files_of(form: FormData) -> list[UploadFile]:
    """The form's file parts (field ``files``, or ``file``); a 400 without any."""
    files: list[UploadFile] = []
    for key, value in form.multi_items():
        if key in ("files", "file") and isinstance(value, str):  # no filename="..." sent
            raise errors.bad_request(
                f'part {key!r} is not a file: send each file with a filename="NAME" '
                "parameter (filename* is not read)",
                param=key,
                code="invalid_file_name",
            )
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

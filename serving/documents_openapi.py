"""The documents API in the OpenAPI document, as it answers: each route's statuses, the
JSON and multipart bodies, and collection names by :func:`check_name`'s pattern (FastAPI
alone would promise a 422, never sent, and no body)."""

from __future__ import annotations

import json
from typing import Any

from serving import uploads
from typed_rag.retrieval.collections import WIKI

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
# The media types of the file types the build reads (the file name's extension decides).
UPLOAD_MEDIA_TYPES = ("application/pdf", "text/markdown", "text/plain", "text/html")
# What typed_rag.retrieval.collections.check_name takes (and not the Wikipedia's name).
NAME_SCHEMA: dict[str, Any] = {
    "type": "string",
    "pattern": "^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$",
    "not": {"anyOf": [{"const": WIKI}, {"pattern": "[.][.]"}]},
}


def describe(doc: dict[str, Any], error_response: dict[str, Any], *, auth: bool) -> None:
    """Document the routes above as they answer."""
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

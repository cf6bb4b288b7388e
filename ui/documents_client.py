"""The demo's client of the server's documents API (``/v1/collections``, ``/v1/jobs``).

The demo reaches the documents service the way it reaches the chat: over HTTP, with the
server's key. So the demo mounted in the server and the demo run alone (``typed-rag ui``)
work the same, every upload passes the server's own checks and limits, and ``ui`` needs
nothing from ``serving``. Errors come back as one sentence for people, never a server path.
"""

from __future__ import annotations

import mimetypes
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

MAX_FILES_PER_REQUEST = 20  # the server's limit (serving.uploads.MAX_FILES_PER_REQUEST)


class DocumentsError(Exception):
    """The server refused or could not be reached; ``str()`` is the sentence to show."""

    def __init__(self, message: str, status: int | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


@dataclass(frozen=True)
class Upload:
    """What one upload request brought: the job that indexes the stored files, or why the
    server refused them (``refused``: file name -> reason)."""

    job: dict[str, Any] | None
    refused: dict[str, str]


class DocumentsClient:
    """Async calls to ``/v1``'s documents endpoints; one short-lived connection each."""

    def __init__(self, api_base: str, api_key: str | None = None, timeout_s: float = 120.0):
        self.base = api_base.rstrip("/")
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.timeout_s = timeout_s

    async def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        try:
            async with httpx.AsyncClient(timeout=self.timeout_s) as http:
                r = await http.request(method, self.base + path, headers=self.headers, **kwargs)
        except httpx.HTTPError:
            raise DocumentsError("The server is not reachable. Is it running?") from None
        try:
            body = r.json()
        except ValueError:
            body = {}
        if r.status_code >= 400:
            error = body.get("error") if isinstance(body, dict) else None
            error = error if isinstance(error, dict) else {}
            message = str(error.get("message") or f"the server answered {r.status_code}")
            raise DocumentsError(message, r.status_code, error.get("code"))
        return body if isinstance(body, dict) else {}

    async def enabled(self) -> bool:
        """Whether the server's documents API answers (off: 403 ``documents_api_off``)."""
        try:
            await self._call("GET", "/jobs", params={"collection": "wiki"})
        except DocumentsError:
            return False
        return True

    async def collections(self) -> list[dict[str, Any]]:
        """``GET /v1/collections``: every collection's card."""
        return list((await self._call("GET", "/collections")).get("data", []))

    async def create(self, name: str) -> None:
        """Make collection ``name``; one that exists already is fine (uploads go into it)."""
        try:
            await self._call("POST", "/collections", json={"name": name})
        except DocumentsError as exc:
            if exc.code != "collection_exists":
                raise

    async def files(self, name: str) -> list[dict[str, Any]]:
        """The collection's documents with their state, pages and passages."""
        return list((await self._call("GET", f"/collections/{name}/files")).get("data", []))

    async def job(self, job_id: str) -> dict[str, Any]:
        return await self._call("GET", f"/jobs/{job_id}")

    async def delete(self, name: str, file_id: str) -> dict[str, Any]:
        """Remove a file; the answer carries the job that rebuilds the collection."""
        return await self._call("DELETE", f"/collections/{name}/files/{file_id}")

    async def upload(self, name: str, paths: list[Path]) -> list[Upload]:
        """Send ``paths`` into collection ``name``, at most 20 a request. The server refuses
        a whole request for one bad file, so a refused batch is sent again one file at a
        time: the refusal lands on the file it names and the others are still indexed."""
        out: list[Upload] = []
        for start in range(0, len(paths), MAX_FILES_PER_REQUEST):
            batch = paths[start : start + MAX_FILES_PER_REQUEST]
            try:
                out.append(Upload(await self._post_files(name, batch), {}))
            except DocumentsError as exc:
                if exc.status is None or exc.status >= 500 or len(batch) == 1:
                    out.append(Upload(None, {p.name: str(exc) for p in batch}))
                    continue
                for path in batch:
                    try:
                        out.append(Upload(await self._post_files(name, [path]), {}))
                    except DocumentsError as one:
                        out.append(Upload(None, {path.name: str(one)}))
        return out

    async def _post_files(self, name: str, paths: list[Path]) -> dict[str, Any]:
        with ExitStack() as stack:
            try:
                parts = [
                    ("files", (p.name, stack.enter_context(p.open("rb")), _media_type(p)))
                    for p in paths
                ]
            except OSError:  # its message would name the demo's temporary folder
                raise DocumentsError("the uploaded file could not be read; drop it again") from None
            return await self._call("POST", f"/collections/{name}/files", files=parts)


def _media_type(path: Path) -> str:
    return mimetypes.guess_type(path.name)[0] or "application/octet-stream"

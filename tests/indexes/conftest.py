"""Fixtures for the indexes area: a local HTTP server with byte ranges, corpus writers."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest


@dataclass
class FileServer:
    """Serves ``files`` on 127.0.0.1; can ignore Range or cut the next response short."""

    port: int = 0
    files: dict[str, bytes] = field(default_factory=dict)
    honor_range: bool = True
    cut_next_after: int | None = None  # bytes of the next body to send before hanging up
    requests: list[dict[str, str | None]] = field(default_factory=list)

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"


def _handler(server: FileServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802 (http.server API)
            name = self.path.lstrip("/")
            rng = self.headers.get("Range")
            server.requests.append({"path": name, "range": rng})
            body = server.files.get(name)
            if body is None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            start = 0
            if rng and server.honor_range:
                start = int(rng.removeprefix("bytes=").split("-", 1)[0])
                if start >= len(body):
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(body)}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            else:
                self.send_response(200)
            rest = body[start:]
            self.send_header("Content-Length", str(len(rest)))
            self.end_headers()
            cut, server.cut_next_after = server.cut_next_after, None
            if cut is not None:
                self.wfile.write(rest[:cut])
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(rest)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@pytest.fixture
def file_server() -> Iterator[FileServer]:
    state = FileServer()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.port = httpd.server_address[1]
    thread = threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def write_lines(path: Path, lines: list[str], *, gz: bool = False) -> Path:
    """Write raw TSV lines (each gets a newline) as given, optionally gzip-compressed."""
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    if gz:
        path.write_bytes(gzip.compress(data))
    else:
        path.write_bytes(data)
    return path

"""A stand-in for the ``llama-server`` binary: same flags, /health and /v1/chat/completions.

Used by the fast supervision tests (start, health wait, restart, shutdown) so they
need no model. Behaviour knobs come from the environment:
FAKE_LLAMA_EXIT=<code>   exit at once with that code (a model that fails to load)
FAKE_LLAMA_LOADING_S=<s> answer /health with 503 for that long (loading)
FAKE_LLAMA_NEVER_READY=1 never become healthy
A user message containing SLOW takes 2 s; one containing DIE kills the server.
Replies carry the server's pid in ``system_fingerprint`` so tests can see restarts.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import sys
import time

STARTED = time.monotonic()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _send(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - http.server API
        loading = float(os.environ.get("FAKE_LLAMA_LOADING_S", "0"))
        if os.environ.get("FAKE_LLAMA_NEVER_READY") or time.monotonic() - STARTED < loading:
            self._send(503, {"error": {"message": "Loading model", "code": 503}})
        elif self.path == "/health":
            self._send(200, {"status": "ok"})
        else:
            self._send(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:  # noqa: N802 - http.server API
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        text = body["messages"][-1]["content"]
        if "DIE" in text:
            os._exit(1)
        if "SLOW" in text:
            time.sleep(2)
        fmt = body.get("response_format") or {}
        if fmt.get("type") == "json_schema":
            content = json.dumps({"schema_title": fmt["json_schema"]["schema"].get("title")})
        else:
            content = f"echo: {text}"
        self._send(
            200,
            {
                "id": "cmpl-fake",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", "fake"),
                "system_fingerprint": str(os.getpid()),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
            },
        )

    def log_message(self, *args: object) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", required=True)
    args, _rest = parser.parse_known_args()
    print(f"fake llama-server {' '.join(sys.argv[1:])}", flush=True)
    code = os.environ.get("FAKE_LLAMA_EXIT")
    if code:
        print("error: failed to load model", flush=True)
        sys.exit(int(code))
    server = http.server.ThreadingHTTPServer((args.host, args.port), Handler)
    server.serve_forever()


if __name__ == "__main__":
    main()

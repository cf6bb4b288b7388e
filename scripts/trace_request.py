"""Follow one HTTP chat request through the project's code and count where it goes (issue 78).

The server app is built as ``typed-rag serve`` builds it (``create_app`` over the settings,
the fake engine unless ``--backend`` says otherwise) and driven in process by httpx over ASGI
after its lifespan has loaded the system. While the one request runs, a profile hook on every
thread records each call into and return out of a project module (``typed_rag``, ``serving``,
``indexes``, ``ui``); library frames are skipped. The walk is the sequence of files of each
function's first call (a helper called per word counts once, as reading the code would
follow it once), consecutive repeats collapsed; ``all_calls`` counts every call and return:

- ``files``: distinct project files entered;
- ``stops``: the walk's length (each time control passes to another project file);
- ``returns``: stops at a file the walk had already left once (a climb back);
- ``entries``: per file, how many stops it takes.

    python scripts/trace_request.py --mode typed-rag --json results/trace/request.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("typed_rag", "serving", "indexes", "ui")


def _project_file(frame: FrameType | None) -> str | None:
    if frame is None:
        return None
    path = frame.f_code.co_filename
    try:
        rel = Path(path).resolve().relative_to(ROOT)
    except ValueError:
        return None
    return str(rel) if rel.parts and rel.parts[0] in PACKAGES else None


class Walk:
    """The project files control passes through, in order (consecutive repeats collapsed)."""

    def __init__(self) -> None:
        self.active = False
        self.stops: list[str] = []  # first calls
        self.all_stops = 0  # every call and return
        self._last = ""
        self._seen: set[Any] = set()
        self._lock = threading.Lock()

    def hook(self, frame: FrameType, event: str, _arg: Any) -> None:
        if not self.active or event not in ("call", "return"):
            return
        where = _project_file(frame if event == "call" else frame.f_back)
        if where is None:
            return
        with self._lock:
            if where != self._last:
                self.all_stops += 1
                self._last = where
            first = event == "call" and frame.f_code not in self._seen
            if first:
                self._seen.add(frame.f_code)
                if not self.stops or self.stops[-1] != where:
                    self.stops.append(where)

    def summary(self) -> dict[str, Any]:
        left: set[str] = set()
        returns = 0
        for prev, here in zip(self.stops, self.stops[1:], strict=False):
            left.add(prev)
            returns += here in left
        return {
            "files": len(set(self.stops)),
            "stops": len(self.stops),
            "returns": returns,
            "functions": len(self._seen),
            "all_calls_stops": self.all_stops,
            "entries": dict(Counter(self.stops).most_common()),
        }


async def trace(mode: str, question: str, overrides: dict[str, Any]) -> dict[str, Any]:
    import httpx

    from serving.app import create_app
    from typed_rag.config import load_settings

    walk = Walk()
    threading.setprofile(walk.hook)  # threads started from here on (the engine's workers)
    sys.setprofile(walk.hook)
    settings = load_settings(None, **{"server.ui": False, "server.warm_up": False, **overrides})
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://trace") as client:
            for _ in range(600):  # the system loads in the background: wait for /health
                if (await client.get("/health")).status_code == 200:
                    break
                await asyncio.sleep(0.5)
            body = {"model": mode, "messages": [{"role": "user", "content": question}]}
            walk.active = True
            reply = await client.post("/v1/chat/completions", json=body, timeout=600)
            walk.active = False
    sys.setprofile(None)
    threading.setprofile(None)  # type: ignore[arg-type]
    if reply.status_code != 200:
        raise SystemExit(f"the request failed: {reply.status_code} {reply.text[:300]}")
    return {"mode": mode, "question": question, "settings": overrides, **walk.summary()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", default="typed-rag", help="the request's model (mode)")
    ap.add_argument("--question", default="Why do leaves change color in autumn?")
    ap.add_argument("--backend", default="fake", help="engine.backend (fake: no model)")
    ap.add_argument("--json", type=Path, help="write the counts here")
    args = ap.parse_args()
    result = asyncio.run(trace(args.mode, args.question, {"engine.backend": args.backend}))
    brief = {k: v for k, v in result.items() if k != "entries"}
    print(json.dumps(brief))
    print("most entered:", ", ".join(f"{f} {n}" for f, n in list(result["entries"].items())[:8]))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()

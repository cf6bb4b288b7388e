"""No response shows a path of the server's disk (issue 80): ``/health``, chat errors (whole
and streamed), collection listings, job status and citations, over real HTTP.

Each server here keeps everything under ``tmp_path`` (its home, index, corpus, documents),
and some fail on purpose with messages that quote those paths, as exceptions do.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.documents.makers import write_pdf
from tests.serving.conftest import (
    CueClassifier,
    ProbeEngine,
    live_server,
    make_rag,
    server_settings,
)
from typed_rag.errors import UserError
from typed_rag.system import TypedRAG

KEY = "sekret"
AUTH = {"Authorization": f"Bearer {KEY}"}
OIL = "How often is the hydraulic oil changed?"


def secrets(tmp_path: Path) -> list[str]:
    """What no body may hold: this test's folders, the temporary folder, the user's home."""
    return [str(tmp_path), str(tmp_path.resolve()), tempfile.gettempdir() + "/",
            str(Path.home()) + "/"]  # fmt: skip


def assert_no_paths(tmp_path: Path, text: str) -> None:
    for secret in secrets(tmp_path):
        assert secret not in text, (secret, text)
    assert "Traceback" not in text


def chat(url: str, question: str, **extra: object) -> dict[str, object]:
    return {
        "model": "rag",
        "messages": [{"role": "user", "content": question}],
        "include_trace": True,
        **extra,
    }


def test_health_and_models_of_a_server_that_failed_to_load(tmp_path: Path) -> None:
    settings = server_settings(
        tmp_path,
        **{
            "retrieval.index_dir": str(tmp_path / "missing-index"),
            "engine.model": str(tmp_path / "models" / "qwen.gguf"),
            "server.api_key": KEY,
        },
    )
    with live_server(settings, None, wait=False) as srv:
        deadline = time.monotonic() + 30
        while (r := httpx.get(srv.url + "/health", timeout=5)).json()["status"] == "loading":
            assert time.monotonic() < deadline, r.text
            time.sleep(0.05)
        assert r.status_code == 503, r.text
        body = r.json()
        assert body["status"] == "failed"
        assert body["error"] == "no index at <retrieval.index_dir>; run `typed-rag index build`"
        assert body["model"] == "qwen.gguf"
        assert_no_paths(tmp_path, r.text)
        models = httpx.get(srv.api + "/models", headers=AUTH, timeout=5)
        assert {m["root"] for m in models.json()["data"]} == {"qwen.gguf"}
        assert_no_paths(tmp_path, models.text)
        # A chat request while failed: a 503 naming the status, nothing of the disk.
        r = httpx.post(srv.api + "/chat/completions", json=chat(srv.url, OIL), headers=AUTH)
        assert r.status_code == 503
        assert_no_paths(tmp_path, r.text)


def test_chat_errors_whole_and_streamed(tmp_path: Path) -> None:
    # The wiki collection has no index here; the engine fails with a message that names a
    # model file, as a library's exception would.
    settings = server_settings(tmp_path, **{"retrieval.index_dir": str(tmp_path / "nothing")})
    model = tmp_path / "models" / "qwen.gguf"
    engine = ProbeEngine(fail_with=UserError(f"cannot open the model file {model}: no such file"))
    with live_server(settings, make_rag(settings, engine)) as srv:
        url = srv.api + "/chat/completions"
        for stream in (False, True):
            r = httpx.post(url, json=chat(srv.url, OIL, collection="wiki", stream=stream))
            assert r.status_code == 404, r.text
            error = r.json()["error"]
            assert error["code"] == "not_found"
            assert "no index at <retrieval.index_dir>" in error["message"]
            assert_no_paths(tmp_path, r.text)

        r = httpx.post(url, json=chat(srv.url, OIL), timeout=30)
        assert r.status_code == 400, r.text
        assert r.json()["error"]["message"] == (
            "cannot open the model file <path>/qwen.gguf: no such file"
        )
        assert_no_paths(tmp_path, r.text)
        with httpx.stream("POST", url, json=chat(srv.url, OIL, stream=True), timeout=30) as r:
            events = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
        assert events[-1] == "[DONE]"
        error = json.loads(events[-2])["error"]  # in-band, once the stream began
        assert error["message"] == "cannot open the model file <path>/qwen.gguf: no such file"
        assert_no_paths(tmp_path, "\n".join(events))


@pytest.fixture()
def documents_default(tmp_path: Path) -> Iterator[str]:
    """A server whose default index (``retrieval.index_dir``) is a documents collection
    built from a folder of this test, with the documents API on (and its key)."""
    from indexes.documents import build_collection
    from typed_rag.retrieval.loader import open_retriever

    settings = server_settings(
        tmp_path,
        **{"retrieval.backend": "numpy", "reranker.kind": "none", "server.api_key": KEY},
    )
    docs = tmp_path / "manuals"
    docs.mkdir()
    write_pdf(
        docs / "press.pdf",
        [("Safety", "Wear goggles."), ("Hydraulics", "Change the hydraulic oil every 2000 hours.")],
    )
    build_collection(settings, "manuals", [docs], show_progress=False, workers=0)
    settings = settings.with_section(
        "retrieval", index_dir=settings.home / "collections" / "manuals"
    )
    rag = TypedRAG(settings, engine=ProbeEngine(), retriever=open_retriever(settings),
                   reranker=None, classifier=CueClassifier())  # fmt: skip
    with live_server(settings, rag) as srv:
        yield srv.url


def test_citations_of_the_default_collection_and_listings(
    documents_default: str, tmp_path: Path
) -> None:
    api = documents_default + "/v1"
    for collection in (None, "manuals"):
        extra = {"collection": collection} if collection else {}
        r = httpx.post(api + "/chat/completions", json=chat(api, OIL, **extra), headers=AUTH)
        assert r.status_code == 200, r.text
        info = r.json()["typed_rag"]
        assert (info["citations"][0]["source"], info["citations"][0]["page"]) == ("press.pdf", 2)
        assert info["citations"][0]["id"] == "press.pdf#2"
        assert_no_paths(tmp_path, r.text)  # the trace too
        streamed = httpx.post(
            api + "/chat/completions", json=chat(api, OIL, stream=True, **extra), headers=AUTH
        )
        assert '"source":"press.pdf"' in streamed.text.replace(" ", "")
        assert_no_paths(tmp_path, streamed.text)
    for path in ("/collections", "/collections/manuals/files", "/models", "/jobs"):
        r = httpx.get(api + path, headers=AUTH, timeout=10)
        assert r.status_code == 200, r.text
        assert_no_paths(tmp_path, r.text)
    cards = {c["id"]: c for c in httpx.get(api + "/collections", headers=AUTH).json()["data"]}
    assert cards["manuals"]["roots"] == ["manuals"]
    r = httpx.get(documents_default + "/health", timeout=10)
    assert r.status_code == 200
    assert_no_paths(tmp_path, r.text)


# A stand-in for the build a job runs: it reports, in its status file and on stderr, the
# absolute paths a real build's messages may carry (its files, the home, other folders).
FAILING_BUILD = """\
import json, sys
args = sys.argv[1:]
status = args[args.index("--status-file") + 1]
docs = args[args.index("--docs") + 1]
config = args[args.index("--config") + 1]
outside = sys.argv[0]
json.dump({
    "phase": "reading", "files_total": 1, "files_done": 1, "passages": 0,
    "current_file": docs + "/notes.md",
    "files": {docs + "/notes.md": {"state": "skipped",
                                  "reason": "cannot read " + docs + "/notes.md: damaged"}},
}, open(status, "w"))
print("typed-rag: error: could not write " + config + " nor " + outside, file=sys.stderr)
sys.exit(1)
"""


def test_a_job_whose_build_names_server_paths(tmp_path: Path) -> None:
    settings = server_settings(tmp_path, **{"server.api_key": KEY})
    script = tmp_path / "elsewhere" / "build.py"
    script.parent.mkdir()
    script.write_text(FAILING_BUILD)
    with live_server(settings, make_rag(settings)) as srv:
        srv.app.state.jobs.command = [sys.executable, str(script)]
        api = srv.api
        assert (
            httpx.post(api + "/collections", json={"name": "shop"}, headers=AUTH).status_code == 201
        )
        files = [("files", ("notes.md", b"# Notes\n\ntext\n", "text/markdown"))]
        up = httpx.post(api + "/collections/shop/files", files=files, headers=AUTH)
        assert up.status_code == 202, up.text
        job_id = up.json()["id"]
        deadline = time.monotonic() + 60
        while (job := httpx.get(f"{api}/jobs/{job_id}", headers=AUTH)).json()["status"] not in (
            "succeeded",
            "failed",
        ):
            assert time.monotonic() < deadline, job.text
            time.sleep(0.1)
        body = job.json()
        assert body["status"] == "failed"
        assert body["error"].startswith("could not write <home>/jobs/job-"), body
        assert body["error"].endswith(".toml nor <path>/build.py"), body
        assert body["outcomes"] == {
            "notes.md": {"state": "skipped", "reason": "cannot read notes.md: damaged"}
        }
        assert_no_paths(tmp_path, job.text)
        for path in ("/jobs", "/collections/shop/files", "/collections"):
            r = httpx.get(api + path, headers=AUTH, timeout=10)
            assert r.status_code == 200, r.text
            assert_no_paths(tmp_path, r.text)
        with httpx.stream("GET", f"{api}/jobs/{job_id}/events", headers=AUTH, timeout=30) as r:
            assert_no_paths(tmp_path, "\n".join(r.iter_lines()))


def test_messages_hide_absolute_paths_but_not_routes_or_urls() -> None:
    from serving.paths import display_model, hide_paths

    assert hide_paths("[Errno 2] No such file: '/opt/m/qwen.gguf'") == (
        "[Errno 2] No such file: '<path>/qwen.gguf'"
    )
    assert hide_paths("dir=/srv/docs/ gone") == "dir=<path>/docs gone"
    kept = 'POST /v1/collections {"name": "x"}, then /health; see http://host:8000/v1/jobs'
    assert hide_paths(kept) == kept
    assert hide_paths("<home>/jobs/job-1.json and 1/2") == "<home>/jobs/job-1.json and 1/2"
    assert display_model("/models/qwen2.5-7b.gguf") == "qwen2.5-7b.gguf"
    assert display_model("Qwen/Qwen2.5-7B-Instruct") == "Qwen/Qwen2.5-7B-Instruct"

"""Documents as a service (issue 80): collections and files over HTTP, indexed by jobs.

Real servers (uvicorn in a thread, or the ``typed-rag serve`` process), real files, real
builds in the job's worker process; the fake engine answers.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from indexes.documents.parse import SUPPORTED
from serving.jobs import settings_toml
from serving.paths import PathScrubber, root_replacements
from tests.conftest import TINY_PASSAGES, write_tsv
from tests.documents.makers import write_pdf
from tests.serving.conftest import (
    LiveServer,
    ProbeEngine,
    cli_server,
    live_server,
    make_rag,
    server_settings,
)
from typed_rag.config import Settings, load_settings
from typed_rag.retrieval.collections import DOCUMENT_SUFFIXES

KEY = "sekret"
AUTH = {"Authorization": f"Bearer {KEY}"}
OIL = "How often is the hydraulic oil changed?"
COOLANT = "How often is the coolant topped up?"
NOTES = b"# Notes\n\n## Coolant\n\nTop up the coolant weekly with the blue bottle.\n"


def settings_for(tmp_path: Path, **extra: Any) -> Settings:
    return server_settings(
        tmp_path, **{"server.api_key": KEY, "retrieval.backend": "numpy", **extra}
    )


def press_pdf(folder: Path) -> Path:
    return write_pdf(
        folder / "press.pdf",
        [("Safety", "Wear goggles."), ("Hydraulics", "Change the hydraulic oil every 2000 hours.")],
        title="Press Brake Manual",
    )


class Client:
    """The documents API of one server, with the key; every answer checked for paths."""

    def __init__(self, url: str, secret_paths: list[str]) -> None:
        self.api = url + "/v1"
        self.secret_paths = secret_paths

    def call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        kwargs.setdefault("headers", AUTH)
        r = httpx.request(method, self.api + path, timeout=60, **kwargs)
        assert r.status_code < 500, r.text
        for secret in self.secret_paths:
            assert secret not in r.text, (secret, r.text)
        return r

    def upload(self, name: str, *files: tuple[str, bytes]) -> httpx.Response:
        parts = [("files", (fname, data, "application/octet-stream")) for fname, data in files]
        return self.call("POST", f"/collections/{name}/files", files=parts)

    def wait(self, job_id: str, timeout_s: float = 120) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            job = self.call("GET", f"/jobs/{job_id}").json()
            if job["status"] in ("succeeded", "failed"):
                return job
            time.sleep(0.2)
        raise TimeoutError(f"job {job_id} still {job['status']}")

    def upload_raw(self, name: str, filename: bytes, data: bytes) -> httpx.Response:
        """A multipart body written by hand: clients escape what a hostile one would not."""
        body = (
            b'--b\r\nContent-Disposition: form-data; name="files"; filename="' + filename
            + b'"\r\nContent-Type: text/markdown\r\n\r\n' + data + b"\r\n--b--\r\n"
        )  # fmt: skip
        headers = {**AUTH, "content-type": "multipart/form-data; boundary=b"}
        return self.call("POST", f"/collections/{name}/files", content=body, headers=headers)

    def files(self, name: str) -> dict[str, dict[str, Any]]:
        r = self.call("GET", f"/collections/{name}/files")
        assert r.status_code == 200, r.text
        return {f["filename"]: f for f in r.json()["data"]}

    def ask(self, question: str, collection: str, **extra: Any) -> httpx.Response:
        body = {
            "model": "rag",
            "messages": [{"role": "user", "content": question}],
            "include_trace": True,
            "collection": collection,
            **extra,
        }
        return self.call("POST", "/chat/completions", json=body)

    def sources(self, question: str, collection: str) -> list[tuple[str, int | None]]:
        r = self.ask(question, collection)
        assert r.status_code == 200, r.text
        passages = r.json()["typed_rag"]["trace"]["passages"]
        return [(p["source"], p["page"]) for p in passages]


@pytest.fixture()
def server(tmp_path: Path) -> Iterator[tuple[LiveServer, Client]]:
    settings = settings_for(tmp_path)
    with live_server(settings, make_rag(settings)) as srv:
        yield srv, Client(srv.url, [str(tmp_path)])


def test_upload_index_ask_and_delete(server: tuple[LiveServer, Client], tmp_path: Path) -> None:
    _, api = server
    made = api.call("POST", "/collections", json={"name": "shop"})
    assert made.status_code == 201 and made.json()["built"] is False, made.text
    pdf = press_pdf(tmp_path)
    up = api.upload("shop", ("press.pdf", pdf.read_bytes()), ("notes.md", NOTES))
    assert up.status_code == 202, up.text
    job = up.json()
    assert job["object"] == "job" and job["status"] in ("queued", "running")
    assert up.headers["location"] == f"/v1/jobs/{job['id']}"
    assert [f["filename"] for f in job["uploaded"]] == ["press.pdf", "notes.md"]

    # The job's events, streamed until it ends.
    events = []
    with httpx.stream("GET", f"{api.api}/jobs/{job['id']}/events", headers=AUTH, timeout=120) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith("data: "):
                events.append(line[6:])
    assert events[-1] == "[DONE]"
    last = json.loads(events[-2])
    assert last["status"] == "succeeded", last
    assert (last["files_done"], last["files_total"], last["passages"]) == (2, 2, 3)
    assert last["outcomes"]["press.pdf"] == {
        "state": "indexed", "passages": 2, "pages": 2, "unchanged": False,
    }  # fmt: skip
    assert last["elapsed_s"] > 0 and last["error"] is None

    files = api.files("shop")
    assert files["press.pdf"]["state"] == "indexed"
    assert (files["press.pdf"]["pages"], files["press.pdf"]["passages"]) == (2, 2)
    assert files["notes.md"]["state"] == "indexed" and files["notes.md"]["pages"] is None

    # Asked about, the collection cites its files by name, with the page.
    assert api.sources(OIL, "shop")[0] == ("press.pdf", 2)
    answer = api.ask(OIL, "shop").json()["typed_rag"]
    assert answer["citations"][0]["source"] == "press.pdf"
    assert answer["citations"][0]["id"] == "press.pdf#2"
    streamed = api.call(
        "POST", "/chat/completions",
        json={"model": "rag", "stream": True, "collection": "shop",
              "messages": [{"role": "user", "content": OIL}]},
    )  # fmt: skip
    assert '"source":"press.pdf"' in streamed.text.replace(" ", "")
    cards = {c["id"]: c for c in api.call("GET", "/collections").json()["data"]}
    assert cards["shop"]["built"] and cards["shop"]["uploads"] and cards["shop"]["roots"] == []

    # A deleted document's passages are gone once its job ran.
    assert ("notes.md", None) in api.sources(COOLANT, "shop")
    gone = api.call("DELETE", f"/collections/shop/files/{files['notes.md']['id']}")
    assert gone.status_code == 202 and gone.json()["deleted"] is True, gone.text
    assert api.wait(gone.json()["job"]["id"])["status"] == "succeeded"
    assert set(api.files("shop")) == {"press.pdf"}
    assert all(src != "notes.md" for src, _ in api.sources(COOLANT, "shop"))

    assert api.call("DELETE", "/collections/shop").json() == {
        "id": "shop", "object": "collection.deleted", "deleted": True,
    }  # fmt: skip
    assert "shop" not in {c["id"] for c in api.call("GET", "/collections").json()["data"]}
    assert not (tmp_path / "home" / "uploads" / "shop").exists()
    assert not (tmp_path / "home" / "collections" / "shop").exists()


def test_bad_uploads_are_refused_with_what_was_wrong(tmp_path: Path) -> None:
    settings = settings_for(
        tmp_path, **{"documents.max_file_mb": 0.001, "documents.max_collection_mb": 0.0025}
    )
    with live_server(settings, make_rag(settings)) as srv:
        api = Client(srv.url, [str(tmp_path)])
        assert api.call("POST", "/collections", json={"name": "shop"}).status_code == 201

        def refused(status: int, code: str, text: str, r: httpx.Response) -> None:
            assert r.status_code == status, r.text
            error = r.json()["error"]
            assert error["code"] == code and text in error["message"], error
            assert set(error) == {"message", "type", "param", "code"}

        md = b"# Note\n\nSome text.\n"
        for name, text in [
            ("../x.md", "is a path"),
            ("a/b.md", "is a path"),
            ("/etc/x.md", "is an absolute path"),
            ("C:\\x.md", "is an absolute path"),
            (".hidden.md", "hidden files are not indexed"),
            ("x" * 300 + ".md", "too long: 303 bytes, at most 255"),
        ]:
            refused(400, "invalid_file_name", text, api.upload("shop", (name, md)))
        refused(400, "invalid_file_name", "NUL byte", api.upload_raw("shop", b"x\x00.md", md))
        refused(400, "invalid_file_name", "control", api.upload_raw("shop", b"x\x1b.md", md))
        refused(400, "invalid_file_name", "is a path", api.upload_raw("shop", b"..\\x.md", md))
        refused(
            400, "duplicate_file", "given twice", api.upload("shop", ("a.md", md), ("a.md", md))
        )
        refused(
            415, "unsupported_file_type",
            "file 'tool.exe' has type '.exe', which is not indexed; allowed: .pdf, .docx",
            api.upload("shop", ("tool.exe", b"MZ")),
        )  # fmt: skip
        refused(415, "unsupported_file_type", "has no type", api.upload("shop", ("README", md)))
        refused(
            413, "request_too_large",
            "file 'big.md' is 0.0 MB, over the limit of 0.001 MB per file (documents.max_file_mb)",
            api.upload("shop", ("big.md", b"x" * 1500)),
        )  # fmt: skip
        many = [(f"n{i}.md", md) for i in range(21)]
        refused(400, "too_many_files", "at most 20", api.upload("shop", *many))
        refused(
            400, "invalid_value", "no files",
            api.call("POST", "/collections/shop/files", files={"x": (None, "1")}),
        )  # fmt: skip
        refused(
            415, "invalid_content_type", "multipart/form-data",
            api.call("POST", "/collections/shop/files", json={"files": []}),
        )  # fmt: skip
        multipart = {**AUTH, "content-type": "multipart/form-data; boundary=b"}
        huge = (  # over 20 files at their limit, and 1 MB
            b'--b\r\nContent-Disposition: form-data; name="files"; filename="a.md"\r\n\r\n'
            + b"x" * 1_100_000 + b"\r\n--b--\r\n"
        )  # fmt: skip
        refused(
            413, "request_too_large", "the upload is larger than 1.02 MB: at most 20 files",
            api.call("POST", "/collections/shop/files", content=huge, headers=multipart),
        )  # fmt: skip
        chunked = (huge[i : i + 65536] for i in range(0, len(huge), 65536))  # no length said
        refused(
            413, "request_too_large", "the upload is larger than",
            api.call("POST", "/collections/shop/files", content=chunked, headers=multipart),
        )  # fmt: skip
        # Nothing was stored by the refused requests; the collection's limit counts files.
        assert api.files("shop") == {}
        up = api.upload("shop", ("a.md", b"a" * 900), ("b.md", b"b" * 900))
        assert up.status_code == 202, up.text
        refused(
            400, "duplicate_file", "already in collection 'shop'", api.upload("shop", ("a.md", md))
        )
        refused(
            413, "request_too_large", "over the limit of 0.0025 MB (documents.max_collection_mb)",
            api.upload("shop", ("c.md", b"c" * 900)),
        )  # fmt: skip
        api.wait(up.json()["id"])

        refused(404, "not_found", "no collection 'lake'", api.upload("lake", ("a.md", md)))
        refused(
            404, "not_found", "no collection 'lake'", api.call("GET", "/collections/lake/files")
        )
        refused(400, "invalid_value", "'wiki' is the Wikipedia", api.upload("wiki", ("a.md", md)))
        refused(400, "invalid_value", "invalid collection name", api.upload("a..b", ("a.md", md)))
        refused(
            400, "invalid_value", "invalid collection name",
            api.call("POST", "/collections", json={"name": "../up"}),
        )  # fmt: skip
        refused(400, "invalid_value", '{"name": NAME}', api.call("POST", "/collections", json={}))
        refused(
            409, "collection_exists", "exists already",
            api.call("POST", "/collections", json={"name": "shop"}),
        )  # fmt: skip
        refused(404, "not_found", "no job 'job-x'", api.call("GET", "/jobs/job-x"))
        refused(
            404, "not_found", "no file 'nope'", api.call("DELETE", "/collections/shop/files/nope")
        )
        refused(404, "not_found", "no collection", api.call("DELETE", "/collections/lake"))
        refused(400, "invalid_value", "'wiki'", api.call("DELETE", "/collections/wiki"))


def test_a_collection_built_on_the_server_is_listed_but_not_changed(tmp_path: Path) -> None:
    from indexes.documents import build_collection

    settings = settings_for(tmp_path)
    docs = tmp_path / "manuals"
    docs.mkdir()
    press_pdf(docs)
    build_collection(settings, "manuals", [docs], show_progress=False, workers=0)
    with live_server(settings, make_rag(settings)) as srv:
        api = Client(srv.url, [str(tmp_path)])
        cards = {c["id"]: c for c in api.call("GET", "/collections").json()["data"]}
        assert cards["manuals"]["roots"] == ["manuals"] and not cards["manuals"]["uploads"]
        files = api.files("manuals")
        assert files["press.pdf"]["state"] == "indexed" and files["press.pdf"]["pages"] == 2
        r = api.upload("manuals", ("a.md", b"# A\n\ntext\n"))
        assert r.status_code == 409 and "built on the server" in r.json()["error"]["message"]
        assert api.sources(OIL, "manuals")[0] == ("press.pdf", 2)


def test_off_without_a_key_and_then_only_with_it(tmp_path: Path) -> None:
    settings = server_settings(tmp_path)  # no server.api_key
    with live_server(settings, make_rag(settings)) as srv:
        r = httpx.post(srv.api + "/collections", json={"name": "shop"}, timeout=10)
        assert r.status_code == 403 and r.json()["error"]["code"] == "documents_api_off"
        assert "server.api_key" in r.json()["error"]["message"]
        assert httpx.get(srv.api + "/jobs/job-x", timeout=10).status_code == 403
        assert httpx.get(srv.api + "/collections", timeout=10).status_code == 200
    keyed = settings_for(tmp_path / "keyed")
    with live_server(keyed, make_rag(keyed)) as srv:
        r = httpx.post(srv.api + "/collections", json={"name": "shop"}, timeout=10)
        assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
        bad = {"Authorization": "Bearer nope"}
        r = httpx.post(srv.api + "/collections", json={"name": "shop"}, headers=bad, timeout=10)
        assert r.status_code == 401
        r = httpx.post(srv.api + "/collections", json={"name": "shop"}, headers=AUTH, timeout=10)
        assert r.status_code == 201
    off = settings_for(tmp_path / "off", **{"documents.uploads": "off"})
    with live_server(off, make_rag(off)) as srv:
        r = httpx.post(srv.api + "/collections", json={"name": "shop"}, headers=AUTH, timeout=10)
        assert r.status_code == 403
    on = server_settings(tmp_path / "on", **{"documents.uploads": "on"})
    with live_server(on, make_rag(on)) as srv:
        r = httpx.post(srv.api + "/collections", json={"name": "shop"}, timeout=10)
        assert r.status_code == 201


GATE = """\
import os, sys, time
gate = sys.argv[1]
while not os.path.exists(gate):
    time.sleep(0.05)
os.execv(sys.executable, [sys.executable, "-m", "cli", *sys.argv[2:]])
"""


def test_queries_see_the_previous_version_while_jobs_run_in_order(
    server: tuple[LiveServer, Client], tmp_path: Path
) -> None:
    srv, api = server
    gate = tmp_path / "gate"
    script = tmp_path / "gate.py"
    script.write_text(GATE)
    srv.app.state.jobs.command = [sys.executable, str(script), str(gate)]
    gate.touch()
    api.call("POST", "/collections", json={"name": "shop"})
    first = api.upload("shop", ("press.pdf", press_pdf(tmp_path).read_bytes())).json()
    assert api.wait(first["id"])["status"] == "succeeded"
    version = os.path.realpath(tmp_path / "home" / "collections" / "shop")

    gate.unlink()  # the next jobs wait at the gate, running
    second = api.upload("shop", ("notes.md", NOTES)).json()
    third = api.upload("shop", ("extra.md", b"# Extra\n\nThe lathe needs oil daily.\n")).json()
    deadline = time.monotonic() + 30
    while api.call("GET", f"/jobs/{second['id']}").json()["status"] != "running":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert api.call("GET", f"/jobs/{third['id']}").json()["status"] == "queued"
    files = api.files("shop")
    assert files["press.pdf"]["state"] == "indexed"
    assert files["notes.md"]["state"] == "indexing"
    assert all(src == "press.pdf" for src, _ in api.sources(COOLANT, "shop"))  # the old version
    assert os.path.realpath(tmp_path / "home" / "collections" / "shop") == version

    gate.touch()
    done2, done3 = api.wait(second["id"]), api.wait(third["id"])
    assert done2["status"] == done3["status"] == "succeeded"
    assert done3["started_at"] >= done2["finished_at"]  # one at a time, in order
    assert ("notes.md", None) in api.sources(COOLANT, "shop")
    assert {f["state"] for f in api.files("shop").values()} == {"indexed"}


def test_twenty_files_index_while_four_streamed_answers_run(tmp_path: Path) -> None:
    """Ingestion runs beside chat: 20 real files (10 PDFs, 10 Markdown) in one upload while 4
    streamed answers are under way; every stream ends with its answer and ``[DONE]``, and
    the job indexes every file."""
    settings = settings_for(tmp_path)
    engine = ProbeEngine(delay_s=0.5, token_delay_s=0.05)
    with live_server(settings, make_rag(settings, engine)) as srv:
        api = Client(srv.url, [str(tmp_path)])
        api.call("POST", "/collections", json={"name": "shop"})
        files = [
            (f"press-{i}.pdf", write_pdf(tmp_path / f"press-{i}.pdf", [
                ("Safety", f"Machine {i}: wear goggles."),
                ("Hydraulics", f"Change the oil of machine {i} every {1000 + i} hours."),
            ]).read_bytes())
            for i in range(10)
        ] + [(f"notes-{i}.md", f"# Notes {i}\n\nTop up coolant {i} weekly.\n".encode())
             for i in range(10)]  # fmt: skip
        streams: list[list[str]] = [[] for _ in range(4)]

        def chat(out: list[str]) -> None:
            body = {"model": "rag", "stream": True,
                    "messages": [{"role": "user", "content": OIL}]}  # fmt: skip
            with httpx.stream(
                "POST", f"{api.api}/chat/completions", json=body, headers=AUTH, timeout=120
            ) as r:
                assert r.status_code == 200
                out.extend(line[6:] for line in r.iter_lines() if line.startswith("data: "))

        threads = [threading.Thread(target=chat, args=(out,)) for out in streams]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 30
        while engine.started < 4:  # every answer is in its engine call before the upload
            assert time.monotonic() < deadline
            time.sleep(0.02)
        up = api.upload("shop", *files)
        assert up.status_code == 202, up.text
        assert engine.finished < 4, "the answers ended before the upload: no overlap tested"
        job = api.wait(up.json()["id"])
        for t in threads:
            t.join(timeout=120)
    assert job["status"] == "succeeded", job
    assert (job["files_done"], job["files_total"]) == (20, 20)
    assert {o["state"] for o in job["outcomes"].values()} == {"indexed"}
    for out in streams:
        assert out[-1] == "[DONE]", out[-3:]
        text = "".join(
            (json.loads(e)["choices"] or [{}])[0].get("delta", {}).get("content") or ""
            for e in out[:-1]
        )
        assert text.strip(), out


def test_a_job_that_finds_no_text_fails_and_says_why(server: tuple[LiveServer, Client]) -> None:
    _, api = server
    api.call("POST", "/collections", json={"name": "shop"})
    job = api.upload("shop", ("empty.md", b"   \n\n"), ("fake.pdf", b"not a pdf")).json()
    done = api.wait(job["id"])
    assert done["status"] == "failed"
    assert "nothing to index in collection 'shop': no file gave any text" in done["error"]
    files = api.files("shop")
    assert files["fake.pdf"]["state"] == "skipped"
    assert "not a PDF" in files["fake.pdf"]["reason"]
    assert files["empty.md"]["state"] == "skipped"
    assert any(e.startswith("fake.pdf: ") for e in done["errors"])

    # With its last file deleted (a name works as the id), the collection is empty again.
    api.call("DELETE", "/collections/shop/files/empty.md")
    last = api.call("DELETE", "/collections/shop/files/fake.pdf").json()["job"]
    assert api.wait(last["id"])["status"] == "succeeded"
    cards = {c["id"]: c for c in api.call("GET", "/collections").json()["data"]}
    assert cards["shop"]["built"] is False and cards["shop"]["files"] == 0


@pytest.mark.slow
def test_a_server_killed_mid_job_restarts_with_the_collection_intact(tmp_path: Path) -> None:
    corpus = write_tsv(tmp_path / "tiny.tsv", TINY_PASSAGES)
    home = tmp_path / "home"
    config = f'api_key = "{KEY}"\n[documents]\nuploads = "auto"'
    numpy = {"TYPED_RAG_RETRIEVAL__BACKEND": "numpy"}
    big = write_pdf(
        tmp_path / "big.pdf",
        [(f"Part {i}", f"Page {i} says the spindle turns at {i}00 rpm. " * 40) for i in range(60)],
    )
    runs = [tmp_path / "run1", tmp_path / "run2"]
    for run in runs:
        run.mkdir()
    procs: list[Any] = []
    with cli_server(
        runs[0], corpus, extra_config=config, home=home, procs=procs, env_extra=numpy
    ) as url:
        api = Client(url, [str(tmp_path)])
        api.call("POST", "/collections", json={"name": "shop"})
        first = api.upload("shop", ("press.pdf", press_pdf(tmp_path).read_bytes())).json()
        assert api.wait(first["id"])["status"] == "succeeded"
        version = os.path.realpath(home / "collections" / "shop")
        job = api.upload("shop", ("big.pdf", big.read_bytes())).json()
        deadline = time.monotonic() + 60
        while api.call("GET", f"/jobs/{job['id']}").json()["phase"] != "reading":
            assert time.monotonic() < deadline, "the job never started reading"
            time.sleep(0.05)
        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait(timeout=10)
    pid = json.loads((home / "jobs" / f"{job['id']}.json").read_text())["pid"]
    deadline = time.monotonic() + 10
    while _alive(pid):  # the build dies with the server: nothing switches the collection
        assert time.monotonic() < deadline, "the build outlived its server"
        time.sleep(0.1)
    assert os.path.realpath(home / "collections" / "shop") == version
    with cli_server(runs[1], corpus, extra_config=config, home=home, env_extra=numpy) as url:
        api = Client(url, [str(tmp_path)])
        killed = api.call("GET", f"/jobs/{job['id']}").json()
        assert killed["status"] == "failed"
        assert "the server stopped while this job ran" in killed["error"]
        files = api.files("shop")
        assert files["press.pdf"]["state"] == "indexed"
        assert files["big.pdf"]["state"] == "failed"
        assert "the server stopped while this job ran" in files["big.pdf"]["reason"]
        assert api.sources(OIL, "shop")[0] == ("press.pdf", 2)
        assert os.path.realpath(home / "collections" / "shop") == version
        # The next job reads what the killed one did not.
        again = api.upload("shop", ("notes.md", NOTES)).json()
        assert api.wait(again["id"])["status"] == "succeeded"
        assert api.files("shop")["big.pdf"]["state"] == "indexed"


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its reaper does not count)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


# -- small units ------------------------------------------------------------------


def test_the_server_accepts_exactly_the_types_the_indexer_reads() -> None:
    assert set(DOCUMENT_SUFFIXES) == SUPPORTED


def test_paths_are_shown_relative_to_their_collection(tmp_path: Path) -> None:
    one = PathScrubber(root_replacements(["/srv/docs"]))
    assert one.text("/srv/docs/sub/a.pdf#3") == "sub/a.pdf#3"
    assert one.text("read /srv/docs") == "read docs"
    two = PathScrubber(root_replacements(["/srv/docs", "/home/u/notes/pump.md"]))
    assert two.walk({"s": ["/srv/docs/a.pdf", "/home/u/notes/pump.md#1"]}) == {
        "s": ["docs/a.pdf", "pump.md#1"]
    }


def test_the_job_settings_file_is_read_back_the_same(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, **{"retrieval.fuse_models": ["a", "b"]})
    path = tmp_path / "job.toml"
    path.write_text(settings_toml(settings))
    assert KEY not in path.read_text()
    back = load_settings(path)
    assert back.model_dump(exclude={"server"}) == settings.model_dump(exclude={"server"})

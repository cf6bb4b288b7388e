"""The demo in a real headless Chromium: sources before the answer, citations that link to
their source, and a collection of the user's own documents cited by file name and page.

Slow (a browser per test): run with ``pytest -m slow -k ui``.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.documents.makers import write_pdf
from tests.serving.conftest import REPO, ProbeEngine, live_server, make_rag, server_settings
from typed_rag.engines.base import ChatRequest, ChatResult
from typed_rag.engines.fake import FakeEngine, scripted_responder

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = REPO / "artifacts" / "ui"
TYPED_RAG = str(Path(sys.executable).parent / "typed-rag")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs /usr/bin/chromium (apt-get install chromium)"
    ),
]


class AnswerGate(ProbeEngine):
    """Plans and sub-answers run at once; the final answer waits for ``gate``, so a test
    sees what the demo shows between retrieval and the answer, with no timing race."""

    async def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResult]:
        return await FakeEngine.generate(self, requests)


@contextmanager
def chromium() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-component-update"],
        )
        try:
            # not tall: the sources panel scrolls, so "scrolls to its source" means something
            yield browser.new_page(viewport={"width": 1280, "height": 720})
        finally:
            browser.close()


def cited_order(page: Any) -> list[str]:
    return page.locator("#tr-sources .tr-src[data-cited=true]").evaluate_all(
        "els => els.map(e => e.dataset.citation)"
    )


def test_sources_arrive_before_the_answer_and_citations_highlight_them(tmp_path: Path) -> None:
    from playwright.sync_api import expect

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    answer = "Chlorophyll stops being made [2]. Then the other pigments show [1]."
    engine = AnswerGate(
        responder=scripted_responder(answer=answer), gate=threading.Event(), token_delay_s=0.05
    )
    settings = server_settings(tmp_path, **{"server.ui": True})
    with live_server(settings, make_rag(settings, engine)) as srv, chromium() as page:
        page.goto(srv.url + "/ui/", timeout=60_000)
        page.locator("#tr-input textarea").fill("Why do leaves change color in autumn?")
        page.locator("#tr-send").click()
        chat, sources = page.locator("#tr-chatbot"), page.locator("#tr-sources")

        # retrieval is over, the answer not begun: the sources are there, per sub-query
        expect(sources).to_contain_text("Autumn leaf color", timeout=15_000)
        expect(sources).to_contain_text("Chlorophyll")
        expect(sources).to_contain_text("found for:")  # each says which sub-query found it
        expect(sources).to_contain_text("sources found")
        expect(page.locator("#tr-status")).to_contain_text("Type: REASON")
        assert "Chlorophyll stops" not in chat.inner_text()
        assert engine.gate is not None and not engine.gate.is_set()
        page.screenshot(path=str(SCREENSHOTS / "sources-before-answer.png"), full_page=True)

        engine.gate.set()  # now the answer streams
        expect(chat).to_contain_text(answer, timeout=30_000)
        expect(page.locator("#tr-status")).to_have_text("", timeout=10_000)  # done

        # cited first, in the order the answer cites them; the rest folded away
        assert cited_order(page) == ["2", "1"]
        folded = page.locator("#tr-sources details.tr-uncited")
        expect(folded).to_have_count(1)
        expect(folded).not_to_have_attribute("open", "")
        expect(folded.locator(".tr-src").first).to_be_hidden()

        # a [1] in the answer is a link: clicking it highlights source 1 and scrolls to it
        page.mouse.wheel(0, -2000)
        link = chat.locator("a", has_text="[1]").last
        expect(link).to_have_attribute("href", re.compile(r"#tr-src-\d+-1$"))
        link.click()
        one = sources.locator(".tr-src[data-citation='1']")
        expect(one).to_have_class(re.compile(r"\btr-hl\b"))
        expect(one).to_be_in_viewport()
        expect(sources.locator(".tr-hl")).to_have_count(1)
        assert page.url.endswith("/ui/")  # no navigation
        page.screenshot(path=str(SCREENSHOTS / "citation-highlight.png"), full_page=True)

        # [2] moves the highlight
        chat.locator("a", has_text="[2]").last.click()
        expect(sources.locator(".tr-src[data-citation='2']")).to_have_class(
            re.compile(r"\btr-hl\b")
        )
        expect(one).not_to_have_class(re.compile(r"\btr-hl\b"))


def test_a_pdf_collection_is_picked_and_cited_by_file_name_and_page(tmp_path: Path) -> None:
    from playwright.sync_api import expect

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    home, docs = tmp_path / "home", tmp_path / "docs"
    docs.mkdir()
    write_pdf(
        docs / "press-brake.pdf",
        [
            ("Safety", "Wear goggles and gloves near the press brake at all times."),
            ("Hydraulics", "Change the hydraulic oil of the press brake every 2000 hours."),
        ],
        title="Press Brake Manual",
    )
    built = subprocess.run(
        [TYPED_RAG, "--set", f"home={home}", "index", "build", "--docs", str(docs), "--name",
         "workshop"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    assert "collection workshop: 1 files" in built.stdout

    prompts: list[str] = []

    def answer(request: ChatRequest) -> str:
        prompts.append(request.messages[-1]["content"])
        return "Every 2000 hours [1]."

    engine = ProbeEngine(responder=scripted_responder(answer=answer), token_delay_s=0.02)
    settings = server_settings(tmp_path, home=str(home), **{"server.ui": True})
    with live_server(settings, make_rag(settings, engine)) as srv, chromium() as page:
        page.goto(srv.url + "/ui/", timeout=60_000)
        picker = page.locator("#tr-collection")
        picker.locator("input").click()
        page.get_by_role("option", name=re.compile(r"^workshop \(1 file")).click()
        expect(picker.locator("input")).to_have_value(re.compile(r"^workshop"))
        page.locator("#tr-input textarea").fill("How often is the hydraulic oil changed?")
        page.locator("#tr-send").click()

        chat, sources = page.locator("#tr-chatbot"), page.locator("#tr-sources")
        expect(chat).to_contain_text("Every 2000 hours [1].", timeout=30_000)
        expect(page.locator("#tr-status")).to_have_text("", timeout=10_000)
        first = sources.locator(".tr-src[data-citation='1']")
        expect(first).to_contain_text("Press Brake Manual — Hydraulics")
        expect(first.locator(".tr-src-file")).to_have_text("press-brake.pdf · page 2 · Hydraulics")
        expect(first.locator("a.tr-src-link")).to_have_count(0)  # no link to a server path
        expect(first).to_contain_text("Change the hydraulic oil of the press brake")

        chat.locator("a", has_text="[1]").last.click()
        expect(first).to_have_class(re.compile(r"\btr-hl\b"))
        page.screenshot(path=str(SCREENSHOTS / "collection-pdf-citation.png"), full_page=True)
    # the request named the collection: its passage, not the Wikipedia default's, was shown
    assert "Change the hydraulic oil of the press brake every 2000 hours" in prompts[-1]


def test_a_pdf_uploaded_in_the_panel_is_indexed_asked_about_and_deleted(tmp_path: Path) -> None:
    """The documents panel end to end: drop a PDF, watch it be indexed by the server's job,
    ask about it in that collection, open the cited passage, delete the file."""
    from playwright.sync_api import expect

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    oil = (
        "Change the hydraulic oil of the press brake every 2000 hours. Drain the old oil "
        "while it is warm, replace the filter cartridge, refill through the strainer and "
        "bleed the cylinders before the first stroke. Record the change in the machine log "
        "with the date, the hours and the name of the technician who did it."
    )
    pdf = write_pdf(
        tmp_path / "press-brake.pdf",
        [("Safety", "Wear goggles and gloves near the press brake."), ("Hydraulics", oil)],
        title="Press Brake Manual",
    )
    engine = ProbeEngine(responder=scripted_responder(answer="Every 2000 hours [1]."))
    settings = server_settings(tmp_path, **{"server.ui": True, "documents.uploads": "on"})
    with live_server(settings, make_rag(settings, engine)) as srv, chromium() as page:
        page.goto(srv.url + "/ui/", timeout=60_000)
        panel = page.locator("#tr-docs")
        expect(panel).to_be_visible(timeout=15_000)  # the documents API is on
        page.locator("#tr-docs-new input, #tr-docs-new textarea").first.fill("manuals")
        page.locator("#tr-docs-files input[type=file]").set_input_files(str(pdf))
        expect(page.locator("#tr-docs-files")).to_contain_text("press-brake.pdf", timeout=15_000)
        page.locator("#tr-docs-upload").click()

        progress = page.locator("#tr-docs-progress")
        done = progress.locator(".tr-doc[data-state=indexed]")
        expect(done).to_contain_text("press-brake.pdf", timeout=120_000)
        expect(done).to_contain_text("indexed · 2 pages · 2 passages")
        expect(progress.locator(".tr-docs-progress")).to_have_attribute("data-done", "true")
        assert str(tmp_path) not in page.content()  # no path of the server's or the demo's
        row = page.locator(".tr-doc-row", has_text="press-brake.pdf")
        expect(row).to_contain_text("indexed")
        page.screenshot(path=str(SCREENSHOTS / "documents-uploaded.png"), full_page=True)

        picker = page.locator("#tr-collection")
        picker.locator("input").click()
        page.get_by_role("option", name=re.compile(r"^manuals \(1 file")).click()
        expect(picker.locator("input")).to_have_value(re.compile(r"^manuals"))
        page.locator("#tr-input textarea").fill("How often is the hydraulic oil changed?")
        page.locator("#tr-send").click()
        chat, sources = page.locator("#tr-chatbot"), page.locator("#tr-sources")
        expect(chat).to_contain_text("Every 2000 hours [1].", timeout=30_000)
        first = sources.locator(".tr-src[data-citation='1']")
        expect(first.locator(".tr-src-file")).to_have_text("press-brake.pdf · page 2 · Hydraulics")
        whole = first.locator("details.tr-src-passage")
        whole.locator("summary").click()
        expect(whole).to_contain_text("name of the technician who did it")
        expect(whole.locator("div")).to_be_visible()
        page.screenshot(path=str(SCREENSHOTS / "documents-cited.png"), full_page=True)

        row.locator(".tr-doc-delete").click()
        expect(progress).to_contain_text("manuals was rebuilt without it", timeout=60_000)
        expect(page.locator("#tr-docs-list")).to_contain_text("No documents")

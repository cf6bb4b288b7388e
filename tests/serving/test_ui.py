"""The Gradio demo: its panels, its API endpoint, and a real headless browser session."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.serving.conftest import (
    REPO,
    LiveServer,
    ProbeEngine,
    collect,
    free_port,
    live_server,
    make_rag,
    server_settings,
)
from ui.render import (
    apply_event,
    badge_html,
    collection_choices,
    linkify,
    plan_markdown,
    sources_html,
    status_markdown,
    unlinkify,
)

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = REPO / "artifacts" / "ui"
QUESTION = "Why do leaves change color in autumn?"

INFO = {
    "mode": "typed-rag",
    "type": "REASON",
    "predicted_type": "REASON",
    "type_source": "classifier",
    "probabilities": {"REASON": 0.83, "EVIDENCE-BASED": 0.1},
    "plan": {"sub_queries": ["why leaves turn", "what chlorophyll does"]},
    "citations": [
        {"citation": 1, "id": "p1", "title": "Autumn leaf color", "snippet": "Leaves change"},
        {"citation": 2, "id": "p2", "title": "Chlorophyll", "snippet": "Green pigment"},
    ],
    "sub_answers": [{"query": "why leaves turn", "answer": "Because [1]."}],
    "fallbacks": [],
}


# --- panels (pure) ------------------------------------------------------------------


def test_badge_shows_type_and_probability() -> None:
    html = badge_html(INFO)
    assert "REASON" in html and "83%" in html and 'data-type="REASON"' in html


def test_badge_explains_low_confidence_and_forced() -> None:
    unsure = dict(
        INFO,
        type="EVIDENCE-BASED",
        type_source="low-confidence-default",
        predicted_type="DEBATE",
        probabilities={"DEBATE": 0.31},
    )
    assert "unsure" in badge_html(unsure) and "DEBATE (31%)" in badge_html(unsure)
    assert "forced" in badge_html(dict(INFO, type_source="forced"))
    assert "no classifier" in badge_html(dict(INFO, type="EVIDENCE-BASED", type_source="none"))
    assert "LLM only" in badge_html({"mode": "llm", "type": None})


def test_plan_lists_sub_queries_sub_answers_and_fallbacks() -> None:
    md = plan_markdown(dict(INFO, fallbacks=["reason: plan unparseable -> rag"]))
    assert "- why leaves turn" in md and "- what chlorophyll does" in md
    assert "Because [1]." in md and "plan unparseable" in md
    debate = plan_markdown(
        {"plan": {"debate_topic": "nuclear", "sub_queries": {"pro": "benefits"}}}
    )
    assert "**Debate topic**: nuclear" in debate and "*pro*: benefits" in debate
    assert "answered directly" in plan_markdown({"plan": {}})


def test_sources_are_numbered_with_titles_and_ids() -> None:
    panel = sources_html(INFO, "", turn=1, final=True)
    assert panel.index("[1]</a> <b>Autumn leaf color</b>") < panel.index("[2]</a> <b>Chlorophyll")
    assert "<code>p1</code>" in panel and "Leaves change" in panel


# What the `sources` progress events bring: whole passages, one event per (sub-)query.
LONG = "Chlorophyll is the green pigment of leaves. " * 12
PDF = "/home/me/docs/press manual.pdf"
FOUND = [
    {
        "event": "sources",
        "query": "why leaves turn",
        "passages": [
            {"citation": 1, "id": "p1", "title": "Autumn leaf color", "text": "Leaves change.",
             "query": "why leaves turn"},
            {"citation": 2, "id": "p2", "title": "Chlorophyll", "text": LONG,
             "query": "why leaves turn"},
        ],
    },
    {
        "event": "sources",
        "query": "hydraulic oil",
        "passages": [
            {"citation": 3, "id": "press#7", "title": "Press Brake Manual — Hydraulics",
             "text": "Change the hydraulic oil every 2000 hours.", "query": "hydraulic oil",
             "source": PDF, "page": 2, "section": "Hydraulics"},
            {"citation": 1, "id": "p1", "title": "Autumn leaf color", "text": "Leaves change.",
             "query": "hydraulic oil"},  # found again: keeps its number and first query
        ],
    },
]  # fmt: skip


def _live() -> dict:
    live: dict = {"mode": "typed-rag"}
    for event in FOUND:
        apply_event(live, event)
    return live


def _ids(panel: str) -> list[str]:
    import re

    return re.findall(r'class="tr-src" id="tr-src-\d+-(\d+)"', panel)


def test_sources_show_as_soon_as_found_in_number_order() -> None:
    live = _live()
    panel = sources_html(live, answer="", turn=3)
    assert _ids(panel) == ["1", "2", "3"] and "3 sources found" in panel
    assert "tr-uncited" not in panel  # nothing folded before the answer
    assert "found for: <i>why leaves turn</i>" in panel  # which sub-query found it
    assert "found for: <i>hydraulic oil</i>" in panel
    assert "3 sources found; writing the answer" in status_markdown(dict(live, stage="sources"))
    # before any event: retrieving; queued: waiting; llm mode or no passages: none used
    assert "Retrieving" in sources_html({"mode": "rag"})
    assert "Waiting" in sources_html({"mode": "rag", "stage": "queued"})
    assert "No passages" in sources_html({"mode": "llm"}, final=True)
    assert "No passages" in sources_html({"mode": "rag", "citations": []}, final=True)


def test_cited_sources_first_in_citation_order_and_the_rest_folded() -> None:
    live = _live()
    answer = "Oil is changed every 2000 hours [3]. Leaves turn [1, 3]."
    final = sources_html(live, answer, turn=3, final=True)
    cited, folded = final.split('<details class="tr-uncited">')
    assert _ids(cited) == ["3", "1"] and _ids(folded) == ["2"]
    assert 'data-cited="true"' in cited and 'data-cited="false"' in folded
    assert "1 more source not cited" in folded
    # while the answer streams the not-yet-cited ones stay open
    streaming = sources_html(live, "Oil is changed [3]", turn=3)
    assert '<details class="tr-uncited" open><summary>2 sources not cited yet' in streaming
    # an answer that cites nothing says so, all sources folded
    none = sources_html(live, "No markers at all.", turn=3, final=True)
    assert "3 sources, none cited by the answer" in none and none.index("<details") < none.index(
        'id="tr-src-3-1"'
    )


def test_citation_markers_link_to_their_source_and_back() -> None:
    answer = "Oil [3]. Leaves [1, 2]. Unknown [9]. Mixed [2; 9]."
    md = linkify(answer, {1, 2, 3}, turn=5)
    assert "Oil [[3]](#tr-src-5-3)." in md
    assert "Leaves [[1]](#tr-src-5-1)[[2]](#tr-src-5-2)." in md
    assert "Unknown [9]." in md and "Mixed [[2]](#tr-src-5-2)[9]." in md
    assert unlinkify(md) == "Oil [3]. Leaves [1][2]. Unknown [9]. Mixed [2][9]."
    # the link targets exist in the panel of the same turn
    panel = sources_html(_live(), answer, turn=5)
    for n in (1, 2, 3):
        assert f'id="tr-src-5-{n}"' in panel and f'href="#tr-src-5-{n}"' in panel


def test_a_document_source_shows_file_name_page_section_and_no_path() -> None:
    panel = sources_html(_live(), "Oil [3].", turn=1, final=True)
    doc = panel[panel.index('id="tr-src-1-3"') :]
    assert "press manual.pdf · page 2 · Hydraulics" in doc
    assert "/home/me" not in doc and "file://" not in doc  # a server path says nothing
    assert "Change the hydraulic oil every 2000 hours." in doc
    assert "<code>p1</code>" in panel  # a Wikipedia passage: its id
    # a long passage: a snippet, and the whole text on click
    long = panel[panel.index('id="tr-src-1-2"') :]
    assert "…" in long and '<details class="tr-src-passage">' in long
    assert " ".join(LONG.split()) in long


def test_final_citations_keep_the_whole_passages_from_the_events() -> None:
    info = {
        "mode": "typed-rag",
        "sources": _live()["sources"],
        "citations": [  # the server's final list: snippets, file and page
            {"citation": 2, "id": "p2", "title": "Chlorophyll", "snippet": LONG[:240]},
            {"citation": 3, "id": "press#7", "title": "Press", "snippet": "Change",
             "source": PDF, "page": 2, "section": None},
        ],
    }  # fmt: skip
    panel = sources_html(info, "See [2].", turn=1, final=True)
    assert _ids(panel) == ["2", "3"]  # the final list decides which sources there are
    assert " ".join(LONG.split()) in panel  # the whole text from the event
    assert "press manual.pdf · page 2 · Hydraulics" in panel  # None does not erase a field
    assert "&lt;" in sources_html(
        {"citations": [{"citation": 1, "title": "<script>", "snippet": "x"}]}, final=True
    )


def test_collection_choices_label_each_collection() -> None:
    cards = [
        {"id": "wiki", "kind": "wikipedia", "built": True, "passages": 12000},
        {"id": "shop", "kind": "documents", "built": True, "passages": 14, "files": 2},
        {"id": "one", "kind": "documents", "built": True, "passages": 3, "files": 1},
    ]
    assert collection_choices(cards) == [
        ("wiki (Wikipedia, 12,000 passages)", "wiki"),
        ("shop (2 files, 14 passages)", "shop"),
        ("one (1 file, 3 passages)", "one"),
    ]
    assert collection_choices([]) == [("wiki", "wiki")]  # the server could not be asked


# --- the demo against a live server -------------------------------------------------


@pytest.fixture(scope="module")
def ui_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    settings = server_settings(tmp_path_factory.mktemp("ui"), **{"server.ui": True})
    engine = ProbeEngine(token_delay_s=0.05)
    with live_server(settings, make_rag(settings, engine)) as srv:
        yield srv


def test_ui_is_mounted(ui_server: LiveServer) -> None:
    r = httpx.get(ui_server.url + "/ui/", follow_redirects=True, timeout=30)
    assert r.status_code == 200 and "gradio" in r.text.lower()


def test_gradio_client_chat_endpoint(ui_server: LiveServer) -> None:
    from gradio_client import Client

    client = Client(ui_server.url + "/ui/", verbose=False)
    history, box, badge, plan, sources, status = client.predict(
        QUESTION, [], "typed-rag", api_name="/chat"
    )
    assert box == "" and status == ""
    assert history[-1]["role"] == "assistant"
    assert "A fake answer [[1]](#tr-src-1-1)." in str(history[-1]["content"])
    assert "REASON" in badge
    assert "Autumn leaf color" in sources and 'id="tr-src-1-1"' in sources
    assert "Sub queries" in plan
    # the collection is a parameter of the endpoint (default: wiki)
    *_, status = client.predict(QUESTION, [], "rag", "wiki", api_name="/chat")
    assert status == ""


def test_demo_says_when_the_server_is_down() -> None:
    from ui.demo import make_responder

    respond = make_responder(f"http://127.0.0.1:{free_port()}/v1")
    outputs = asyncio.run(collect(respond(QUESTION, [], "typed-rag")))
    status = outputs[-1][5]
    assert "not reachable" in status
    assert "not reachable" in outputs[-1][0][-1]["content"]


def test_demo_says_when_the_server_is_busy(tmp_path: Path) -> None:
    from ui.demo import make_responder

    settings = server_settings(tmp_path, **{"server.max_concurrent": 1, "server.max_queue": 0})
    engine = ProbeEngine(gate=threading.Event())  # the blocker runs until the demo has asked
    with live_server(settings, make_rag(settings, engine)) as srv, slot_held(srv, engine):
        outputs = asyncio.run(collect(make_responder(srv.api)(QUESTION, [], "llm")))
    assert "busy" in outputs[-1][5]


def test_demo_shows_the_queue_position_then_the_answer(tmp_path: Path) -> None:
    from ui.demo import make_responder

    settings = server_settings(tmp_path, **{"server.max_concurrent": 1, "server.short_slots": 0})
    engine = ProbeEngine(gate=threading.Event())  # the blocker holds the one slot
    with live_server(settings, make_rag(settings, engine)) as srv, slot_held(srv, engine):

        async def ask() -> list:
            out = []
            async for item in make_responder(srv.api)(QUESTION, [], "typed-rag"):
                out.append(item)
                if "in the queue" in str(item[5]):
                    engine.gate.set()  # seen waiting: let the slot free up
            return out

        outputs = asyncio.run(asyncio.wait_for(ask(), 30))
    waiting = next(o for o in outputs if "in the queue" in str(o[5]))
    assert "place 1 in the queue" in waiting[5] and "Waiting for the server" in waiting[4]
    assert outputs[-1][5] == "" and "A fake answer" in outputs[-1][0][-1]["content"]


@contextlib.contextmanager
def slot_held(srv, engine: ProbeEngine) -> Iterator[None]:
    """A request holding a slot (the engine waits on its gate) until the block ends."""
    body = {"model": "llm", "messages": [{"role": "user", "content": "Why?"}]}
    blocker = threading.Thread(
        target=lambda: httpx.post(srv.api + "/chat/completions", json=body, timeout=30)
    )
    blocker.start()
    deadline = 100
    while srv.metric("typed_rag_requests_in_flight") < 1 and deadline:
        deadline -= 1
        threading.Event().wait(0.05)
    try:
        yield
    finally:
        engine.gate.set()
        blocker.join(30)


# --- a real browser -------------------------------------------------------------------


@pytest.mark.skipif(
    not CHROMIUM.exists(), reason="needs /usr/bin/chromium (apt-get install chromium)"
)
def test_browser_chat_streams_and_shows_type_and_sources(ui_server: LiveServer) -> None:
    from playwright.sync_api import expect, sync_playwright

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM),
            args=[
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
            ],
        )
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(ui_server.url + "/ui/", timeout=60_000)
            box = page.locator("#tr-input textarea")
            box.fill(QUESTION)
            page.locator("#tr-send").click()
            chat = page.locator("#tr-chatbot")
            expect(chat).to_contain_text("A fake answer [1].", timeout=30_000)
            expect(chat).to_contain_text(QUESTION)
            badge = page.locator("#tr-badge")
            expect(badge).to_contain_text("REASON", timeout=10_000)
            expect(badge).to_contain_text("%")
            sources = page.locator("#tr-sources")
            expect(sources).to_contain_text("[1] Autumn leaf color")
            page.get_by_text("Plan", exact=True).click()
            expect(page.locator("#tr-plan")).to_contain_text("why do leaves change color")
            page.screenshot(path=str(SCREENSHOTS / "chat.png"), full_page=True)

            # switching the mode changes the pipeline the server runs
            page.locator("#tr-mode").get_by_text("llm", exact=True).click()
            expect(page.locator("#tr-mode input[value=llm]")).to_be_checked()
            box.fill("Is nuclear power a good idea?")
            page.locator("#tr-send").click()
            expect(badge).to_contain_text("LLM only", timeout=30_000)
            expect(sources).to_contain_text("No passages")
            page.screenshot(path=str(SCREENSHOTS / "chat-llm-mode.png"), full_page=True)
        finally:
            browser.close()


@pytest.mark.skipif(
    not CHROMIUM.exists(), reason="needs /usr/bin/chromium (apt-get install chromium)"
)
def test_browser_shows_type_plan_and_sub_answers_before_the_answer(tmp_path: Path) -> None:
    """Every engine call takes 1.5 s: the status must show each step as it happens."""
    from playwright.sync_api import expect, sync_playwright

    # The paper's profile: a slow round of generated sub-answers between plan and answer.
    settings = server_settings(tmp_path, **{"server.ui": True, "method.profile": "paper"})
    engine = ProbeEngine(delay_s=1.5, token_delay_s=0.05)
    with live_server(settings, make_rag(settings, engine)) as srv, sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM), args=["--headless", "--no-sandbox", "--disable-gpu"]
        )
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(srv.url + "/ui/", timeout=60_000)
            page.locator("#tr-input textarea").fill(QUESTION)
            status = page.locator("#tr-status")
            chat = page.locator("#tr-chatbot")
            page.locator("#tr-send").click()
            sent = time.monotonic()
            # the type, right after classification: long before the first engine call ends
            expect(status).to_contain_text("Type: REASON", timeout=5_000)
            first_status_s = time.monotonic() - sent
            assert "A fake answer" not in chat.inner_text()
            expect(page.locator("#tr-badge")).to_contain_text("REASON")
            # the plan, then each sub-answer, still before the answer
            expect(status).to_contain_text("what happens to chlorophyll in autumn", timeout=10_000)
            expect(status).to_contain_text("✓", timeout=10_000)
            assert "A fake answer" not in chat.inner_text()
            page.screenshot(path=str(SCREENSHOTS / "chat-progress.png"), full_page=True)
            expect(chat).to_contain_text("A fake answer [1].", timeout=30_000)
            expect(status).to_have_text("", timeout=10_000)  # cleared once answered
            assert first_status_s < 5.0
        finally:
            browser.close()


def test_live_status_renders_each_event() -> None:
    from ui.render import apply_event, status_markdown

    live: dict = {"mode": "typed-rag"}
    apply_event(live, {"event": "type", "type": "REASON", "type_source": "classifier"})
    assert "**Type:** REASON" in status_markdown(live) and "Planning" in status_markdown(live)
    apply_event(live, {"event": "plan", "plan": {"sub_queries": ["a <b>", "c"]}})
    md = status_markdown(live)
    assert "a &lt;b&gt; · c" in md and "0/2 done" in md
    apply_event(live, {"event": "sub_answer", "index": 1, "total": 2, "query": "c", "answer": "C."})
    assert "✓ *c*: C." in status_markdown(live) and "1/2 done" in status_markdown(live)
    apply_event(live, {"event": "sub_answer", "index": 0, "total": 2, "query": "a", "answer": "A"})
    assert "Writing the answer" in status_markdown(live)
    assert "- *c*: C." in plan_markdown(live)  # the plan panel shows them too


def test_demo_is_behind_the_api_key_when_one_is_set(tmp_path: Path) -> None:
    from gradio_client import Client

    settings = server_settings(tmp_path, **{"server.ui": True, "server.api_key": "s3cret"})
    with live_server(settings, make_rag(settings)) as srv:
        from gradio_client.exceptions import AuthenticationError

        assert httpx.get(srv.url + "/ui/config").status_code == 401
        with pytest.raises(AuthenticationError):
            Client(srv.url + "/ui/", verbose=False)
        with pytest.raises(ValueError, match="Could not login"):
            Client(srv.url + "/ui/", auth=("anyone", "wrong"), verbose=False)
        client = Client(srv.url + "/ui/", auth=("anyone", "s3cret"), verbose=False)
        history, *_rest, status = client.predict(QUESTION, [], "rag", api_name="/chat")
        assert status == "" and "A fake answer" in str(history[-1]["content"])


def test_login_page_says_the_password_is_the_api_key(tmp_path: Path) -> None:
    settings = server_settings(tmp_path, **{"server.ui": True, "server.api_key": "s3cret"})
    with live_server(settings, make_rag(settings)) as srv:
        page = httpx.get(srv.url + "/ui/", follow_redirects=True, timeout=30).text
        assert "API key" in page and "server.api_key" in page


def test_demo_sends_the_conversation_and_shows_the_rewrite(tmp_path: Path) -> None:
    import json

    from typed_rag.engines.fake import scripted_responder
    from ui.demo import make_responder

    standalone = "Where was tea first grown?"
    engine = ProbeEngine(
        responder=scripted_responder({"standalone_question": json.dumps({"question": standalone})})
    )
    settings = server_settings(tmp_path)
    earlier = [
        {"role": "user", "content": "What is tea?"},
        {"role": "assistant", "content": "Tea is an aromatic beverage [1]."},
        {"role": "assistant", "content": "⚠️ The server is busy."},  # a shown error: not sent
    ]
    with live_server(settings, make_rag(settings, engine)) as srv:
        respond = make_responder(srv.api)
        outputs = asyncio.run(collect(respond("Where was it first grown?", earlier, "rag")))
    history, _box, _badge, plan, _sources, status = outputs[-1]
    assert status == "" and history[-2]["content"] == "Where was it first grown?"
    assert f"understood as**: {standalone}" in plan
    rewrite_call = next(c for c in engine.calls if c.json_schema is not None)
    prompt = rewrite_call.messages[-1]["content"]
    assert "Tea is an aromatic beverage" in prompt and "busy" not in prompt
    assert "A fake answer" in history[-1]["content"]

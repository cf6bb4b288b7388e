"""The Gradio chat demo: a client of the server's own OpenAI endpoint.

It streams answers with the ``openai`` SDK (so it exercises exactly what any
client sees), and shows what Typed-RAG did: the detected type as a badge, the
plan in a collapsible panel and the numbered sources. It shows each thing when it is
known: the queue position while the request waits, then from the stream's progress
chunks the type, the plan, the sources as soon as retrieval ends (per sub-query), each
sub-answer, then the answer as it streams. The answer's ``[n]`` markers link to their
source (a click highlights it); the sources the answer cites come first, in the order
it cites them, the others folded away. A collection picker (``GET /v1/collections``)
chooses what to answer from; a document's source shows its file name and page. Where the
server's documents API is on, a panel uploads files into a collection and follows their
indexing (:mod:`ui.documents`). The same
Blocks app is mounted at ``/ui`` by ``typed-rag serve`` or run alone by ``typed-rag ui``.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import gradio as gr
import httpx
import openai
from fastapi import FastAPI

from typed_rag.types import MODES
from ui.documents import CSS as DOCUMENTS_CSS
from ui.documents import documents_panel
from ui.render import (
    EMPTY_BADGE,
    EMPTY_PLAN,
    apply_event,
    badge_html,
    checked_markdown,
    collection_choices,
    linkify,
    plan_markdown,
    source_list,
    sources_html,
    status_markdown,
    unlinkify,
)

log = logging.getLogger(__name__)

CSS = (
    """
.tr-badge { color: white; padding: 4px 12px; border-radius: 999px; font-weight: 600;
            display: inline-block; font-size: 0.95em; }
.tr-badge-note { color: #6b7280; font-size: 0.85em; margin-left: 6px; }
.tr-badge-empty { color: #6b7280; font-style: italic; }
#tr-status:empty { display: none; }
.tr-src { padding: 6px 8px; margin: 4px 0; border-radius: 6px;
          border-left: 3px solid transparent; transition: background 0.3s; }
.tr-src.tr-hl { background: rgba(245, 158, 11, 0.25); border-left-color: #f59e0b; }
.tr-src-num { font-weight: 600; text-decoration: none; }
.tr-src-file, .tr-src-query, .tr-src-note { color: #6b7280; font-size: 0.85em; }
.tr-src-snippet { font-size: 0.9em; }
.tr-src-passage > summary, .tr-uncited > summary { cursor: pointer; color: #6b7280;
                                                  font-size: 0.85em; }
"""
    + DOCUMENTS_CSS
)

# A click on an answer's [n] link (or a source's own number) highlights source n and
# scrolls to it, opening the folded list if it is there. One listener for the page,
# in the capture phase, so no component's handler turns the link into a navigation.
HEAD = """<script>
(function () {
  if (window.__trCitations) return;
  window.__trCitations = true;
  document.addEventListener("click", function (event) {
    var link = event.target && event.target.closest
      ? event.target.closest('a[href^="#tr-src-"]') : null;
    if (!link) return;
    event.preventDefault();
    event.stopPropagation();
    var source = document.getElementById(link.getAttribute("href").slice(1));
    document.querySelectorAll(".tr-src.tr-hl").forEach(function (el) {
      el.classList.remove("tr-hl");
    });
    if (!source) return;  // a source of an earlier answer: the panel shows the last one's
    var folded = source.closest("details");
    if (folded) folded.open = true;
    source.classList.add("tr-hl");
    source.scrollIntoView({behavior: "smooth", block: "center"});
  }, true);
})();
</script>"""

EXAMPLES = [
    "Why do leaves change color in autumn?",
    "How do I bake bread at home?",
    "Is nuclear power a good idea?",
    "What is the difference between coffee and tea?",
]

LOGIN_MESSAGE = "Password: the server's API key (server.api_key). Any user name works."

Outputs = tuple[list[dict[str, str]], str, str, str, str, str]
DEFAULT_COLLECTION = "wiki"  # the server's default (typed_rag.retrieval.collections.WIKI)


def _error_text(exc: Exception, api_base: str) -> str:
    """One sentence for the user: busy, down, or what the server said."""
    if isinstance(exc, openai.APIConnectionError) and not isinstance(exc, openai.APITimeoutError):
        return f"The Typed-RAG server at {api_base} is not reachable. Is it running?"
    if isinstance(exc, openai.APITimeoutError):
        return "The server took too long to answer. Try again, or a simpler question."
    if isinstance(exc, openai.RateLimitError):
        return "The server is busy (too many questions at once). Please retry in a moment."
    if isinstance(exc, openai.APIStatusError) and exc.status_code == 503:
        return "The server is not ready (model loading or restarting). Please retry shortly."
    if isinstance(exc, openai.AuthenticationError):
        return "The server rejected the API key."
    if isinstance(exc, openai.APIError):
        return f"The server could not answer: {exc.message}"
    return f"Unexpected error: {exc}"


def _live_plan(live: dict[str, Any]) -> str:
    """The plan panel while the question runs: "Planning…" until a plan or sub-answer exists."""
    if live.get("plan") or live.get("sub_answers") or live.get("fallbacks"):
        return plan_markdown(live)
    return "_Planning…_"


def _conversation(history: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Earlier turns for the server (follow-ups are rewritten from them); errors left out."""
    out = []
    for turn in history:
        content = turn.get("content")
        if turn.get("role") not in ("user", "assistant") or not isinstance(content, str):
            continue
        if not content.strip() or content.startswith("⚠️"):
            continue
        out.append({"role": str(turn["role"]), "content": unlinkify(content)})
    return out


def make_responder(
    api_base: str, api_key: str | None = None, timeout_s: float = 600.0
) -> Callable[..., AsyncIterator[Outputs]]:
    """The chat handler: stream one answer and fill the side panels as things become known."""
    client = openai.AsyncOpenAI(
        base_url=api_base, api_key=api_key or "not-needed", max_retries=0, timeout=timeout_s
    )

    async def respond(
        message: str,
        history: list[dict[str, Any]] | None,
        mode: str,
        collection: str | None = DEFAULT_COLLECTION,
    ) -> AsyncIterator[Outputs]:
        history = list(history or [])
        question = (message or "").strip()
        if not question:
            yield history, "", EMPTY_BADGE, EMPTY_PLAN, sources_html(None), "Type a question first."
            return
        conversation = _conversation(history)
        history.append({"role": "user", "content": question})
        history.append({"role": "assistant", "content": ""})
        turn = len(history) - 1  # the answer's place: its source ids carry it
        mode = mode if mode in MODES else "typed-rag"
        live: dict[str, Any] = {"mode": mode}
        shown = {"sources": sources_html(live, turn=turn)}

        def sources(html: str) -> Any:
            """The panel, or "no change" (the list can be long; the answer streams per token)."""
            if html == shown["sources"]:
                return gr.skip()
            shown["sources"] = html
            return html

        yield history, "", EMPTY_BADGE, "_Planning…_", shown["sources"], "_Sending…_"
        answer = ""
        info: dict[str, Any] | None = None
        extra_body = {}
        if collection and collection != DEFAULT_COLLECTION and mode != "llm":
            extra_body["collection"] = collection
        try:
            stream = await client.chat.completions.create(
                model=mode,
                messages=[*conversation, {"role": "user", "content": question}],
                stream=True,
                extra_body=extra_body or None,
            )
            async for chunk in stream:
                extra = getattr(chunk, "typed_rag", None)
                if extra is not None:
                    extra = extra if isinstance(extra, dict) else dict(extra)
                    if "event" in extra:  # a progress chunk: show it at once
                        apply_event(live, extra)
                        yield (
                            history,
                            "",
                            badge_html(live) if live.get("type") else EMPTY_BADGE,
                            _live_plan(live),
                            sources(sources_html(live, answer, turn)),
                            status_markdown(live, answering=bool(answer)),
                        )
                        continue
                    info = extra
                if chunk.choices and chunk.choices[0].delta.content:
                    answer += chunk.choices[0].delta.content
                    known = {int(s.get("citation", 0)) for s in source_list(live)}
                    history[-1] = {"role": "assistant", "content": linkify(answer, known, turn)}
                    yield (
                        history,
                        "",
                        badge_html(live) if live.get("type") else EMPTY_BADGE,
                        _live_plan(live),
                        sources(sources_html(live, answer, turn)),
                        status_markdown(live, answering=True),
                    )
        except Exception as exc:  # noqa: BLE001 - shown to the user, logged here
            log.info("demo request failed: %r", exc)
            text = _error_text(exc, api_base)
            history[-1] = {"role": "assistant", "content": f"⚠️ {text}"}
            yield history, "", EMPTY_BADGE, EMPTY_PLAN, sources_html(None), f"⚠️ {text}"
            return
        info = dict(info or {"mode": mode})
        info["sources"] = live.get("sources") or {}  # the whole passages the events brought
        answer = info.get("checked_answer") or answer  # what the checks left of what streamed
        known = {int(s.get("citation", 0)) for s in source_list(info)}
        history[-1] = {"role": "assistant", "content": linkify(answer, known, turn)}
        yield (
            history,
            "",
            badge_html(info),
            plan_markdown(info),
            sources_html(info, answer, turn, final=True),
            checked_markdown(info),
        )

    return respond


def make_collection_loader(
    api_base: str, api_key: str | None = None
) -> Callable[[str | None], Any]:
    """The collection picker's filler: ``GET /v1/collections``, keeping the current choice
    when it is still there."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    async def load(current: str | None = None) -> Any:
        try:
            async with httpx.AsyncClient(timeout=10) as http:
                r = await http.get(api_base.rstrip("/") + "/collections", headers=headers)
                r.raise_for_status()
                cards = r.json().get("data", [])
        except (httpx.HTTPError, ValueError) as exc:
            log.info("demo could not list the collections: %r", exc)
            cards = []
        choices = collection_choices(cards)
        names = [value for _label, value in choices]
        value = current if current in names else DEFAULT_COLLECTION
        return gr.update(choices=choices, value=value)

    return load


def build_demo(
    api_base: str,
    api_key: str | None = None,
    concurrency: int | None = 8,
    timeout_s: float = 600.0,
) -> gr.Blocks:
    """The Blocks app; ``api_base`` is the server's ``/v1`` URL."""
    respond = make_responder(api_base, api_key, timeout_s)
    with gr.Blocks(title="Typed-RAG", analytics_enabled=False) as demo:
        gr.Markdown(
            "## Typed-RAG\nAsk a non-factoid question. Typed-RAG detects its type, "
            "plans sub-queries for it, retrieves passages (Wikipedia, or your own documents) "
            "and answers with citations: click a [n] to see its source."
        )
        with gr.Row():
            with gr.Column(scale=3):
                chatbot = gr.Chatbot(
                    label="Answer", elem_id="tr-chatbot", height=460, feedback_options=None
                )
                # live progress (type, plan, sub-answers) while a question runs
                status = gr.Markdown("", elem_id="tr-status")
                with gr.Row():
                    box = gr.Textbox(
                        placeholder="e.g. Why do leaves change color in autumn?",
                        show_label=False,
                        elem_id="tr-input",
                        scale=5,
                        submit_btn=False,
                    )
                    send = gr.Button("Ask", variant="primary", elem_id="tr-send", scale=1)
                gr.Examples(EXAMPLES, inputs=box)
            with gr.Column(scale=2):
                mode = gr.Radio(
                    list(MODES),
                    value="typed-rag",
                    label="Mode",
                    info="typed-rag: type-aware; rag: plain RAG; llm: no retrieval",
                    elem_id="tr-mode",
                )
                with gr.Row():
                    collection = gr.Dropdown(
                        [(DEFAULT_COLLECTION, DEFAULT_COLLECTION)],
                        value=DEFAULT_COLLECTION,
                        label="Collection",
                        info="what to answer from: Wikipedia, or documents you indexed "
                        "(uploaded below, or typed-rag index build --docs PATH --name NAME)",
                        elem_id="tr-collection",
                        scale=5,
                    )
                    refresh = gr.Button(
                        "↻", elem_id="tr-collections-refresh", size="sm", scale=0, min_width=44
                    )
                gr.Markdown("**Question type**")
                badge = gr.HTML(EMPTY_BADGE, elem_id="tr-badge")
                with gr.Accordion("Plan", open=False, elem_id="tr-plan-box"):
                    plan = gr.Markdown(EMPTY_PLAN, elem_id="tr-plan")
                gr.Markdown("**Sources**")
                sources = gr.HTML(sources_html(None), elem_id="tr-sources")
                clear = gr.Button("Clear", elem_id="tr-clear")
        documents_panel(demo, api_base, api_key, collection, concurrency)

        outputs = [chatbot, box, badge, plan, sources, status]
        inputs = [box, chatbot, mode, collection]
        send.click(respond, inputs, outputs, api_name="chat", concurrency_limit=concurrency)
        box.submit(respond, inputs, outputs, api_name=False, concurrency_limit=concurrency)
        clear.click(
            lambda: ([], "", EMPTY_BADGE, EMPTY_PLAN, sources_html(None), ""),
            None,
            outputs,
            api_name=False,
        )
        load_collections = make_collection_loader(api_base, api_key)
        demo.load(load_collections, collection, collection, api_name=False)
        refresh.click(load_collections, collection, collection, api_name=False)
    return demo


def mount_demo(
    app: FastAPI,
    api_base: str,
    *,
    path: str = "/ui",
    api_key: str | None = None,
    concurrency: int | None = 8,
    timeout_s: float = 600.0,
) -> FastAPI:
    """Mount the demo on the server's app. With an API key set, the demo asks for it
    as the password (any user name), so the UI is no way around the key."""
    demo = build_demo(api_base, api_key, concurrency, timeout_s)
    auth = None
    if api_key:
        key = api_key

        def auth(_user: str, password: str) -> bool:
            return hmac.compare_digest(password.encode(), key.encode())

    return gr.mount_gradio_app(
        app,
        demo,
        path=path,
        auth=auth,
        auth_message=LOGIN_MESSAGE if auth else None,
        footer_links=[],
        css=CSS,
        head=HEAD,
    )


def launch(
    api_base: str,
    *,
    host: str = "127.0.0.1",
    port: int = 7860,
    api_key: str | None = None,
    timeout_s: float = 600.0,
) -> None:
    """Run the demo alone against a server that is already running (``typed-rag ui``)."""
    demo = build_demo(api_base, api_key, timeout_s=timeout_s)
    demo.launch(
        server_name=host,
        server_port=port,
        css=CSS,
        head=HEAD,
        footer_links=[],
        show_error=True,
    )

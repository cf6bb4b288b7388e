"""The Gradio chat demo: a client of the server's own OpenAI endpoint.

It streams answers with the ``openai`` SDK (so it exercises exactly what any
client sees), and shows what Typed-RAG did: the detected type as a badge, the
plan in a collapsible panel and the numbered sources. While a question runs,
the stream's progress chunks fill a live status line (type, plan, each
sub-answer as it completes) before the answer's first token. The same Blocks app is
mounted at ``/ui`` by ``typed-rag serve`` or run alone by ``typed-rag ui``.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import gradio as gr
import openai
from fastapi import FastAPI

from typed_rag.pipelines import MODES
from ui.render import (
    EMPTY_BADGE,
    EMPTY_PLAN,
    EMPTY_SOURCES,
    apply_event,
    badge_html,
    plan_markdown,
    sources_markdown,
    status_markdown,
)

log = logging.getLogger(__name__)

CSS = """
.tr-badge { color: white; padding: 4px 12px; border-radius: 999px; font-weight: 600;
            display: inline-block; font-size: 0.95em; }
.tr-badge-note { color: #6b7280; font-size: 0.85em; margin-left: 6px; }
.tr-badge-empty { color: #6b7280; font-style: italic; }
#tr-status:empty { display: none; }
"""

EXAMPLES = [
    "Why do leaves change color in autumn?",
    "How do I bake bread at home?",
    "Is nuclear power a good idea?",
    "What is the difference between coffee and tea?",
]

LOGIN_MESSAGE = "Password: the server's API key (server.api_key). Any user name works."

Outputs = tuple[list[dict[str, str]], str, str, str, str, str]


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
        out.append({"role": str(turn["role"]), "content": content})
    return out


def make_responder(
    api_base: str, api_key: str | None = None, timeout_s: float = 600.0
) -> Callable[..., AsyncIterator[Outputs]]:
    """The chat handler: stream one answer and fill the side panels from ``typed_rag``."""
    client = openai.AsyncOpenAI(
        base_url=api_base, api_key=api_key or "not-needed", max_retries=0, timeout=timeout_s
    )

    async def respond(
        message: str, history: list[dict[str, Any]] | None, mode: str
    ) -> AsyncIterator[Outputs]:
        history = list(history or [])
        question = (message or "").strip()
        if not question:
            yield history, "", EMPTY_BADGE, EMPTY_PLAN, EMPTY_SOURCES, "Type a question first."
            return
        conversation = _conversation(history)
        history.append({"role": "user", "content": question})
        history.append({"role": "assistant", "content": ""})
        mode = mode if mode in MODES else "typed-rag"
        live: dict[str, Any] = {"mode": mode}
        yield history, "", EMPTY_BADGE, "_Planning…_", "_Retrieving…_", "_Sending…_"
        answer = ""
        info: dict[str, Any] | None = None
        try:
            stream = await client.chat.completions.create(
                model=mode if mode in MODES else "typed-rag",
                messages=[*conversation, {"role": "user", "content": question}],
                stream=True,
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
                            badge_html(live),
                            _live_plan(live),
                            "_Retrieving…_",
                            status_markdown(live),
                        )
                        continue
                    info = extra
                if chunk.choices and chunk.choices[0].delta.content:
                    answer += chunk.choices[0].delta.content
                    history[-1] = {"role": "assistant", "content": answer}
                    yield (
                        history,
                        "",
                        badge_html(live) if live.get("type") else EMPTY_BADGE,
                        _live_plan(live),
                        "_Retrieving…_",
                        status_markdown(live, answering=True),
                    )
        except Exception as exc:  # noqa: BLE001 - shown to the user, logged here
            log.info("demo request failed: %r", exc)
            text = _error_text(exc, api_base)
            history[-1] = {"role": "assistant", "content": f"⚠️ {text}"}
            yield history, "", EMPTY_BADGE, EMPTY_PLAN, EMPTY_SOURCES, f"⚠️ {text}"
            return
        yield (
            history,
            "",
            badge_html(info),
            plan_markdown(info),
            sources_markdown(info),
            "",
        )

    return respond


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
            "plans sub-queries for it, retrieves Wikipedia passages and answers with citations."
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
                gr.Markdown("**Question type**")
                badge = gr.HTML(EMPTY_BADGE, elem_id="tr-badge")
                with gr.Accordion("Plan", open=False, elem_id="tr-plan-box"):
                    plan = gr.Markdown(EMPTY_PLAN, elem_id="tr-plan")
                gr.Markdown("**Sources**")
                sources = gr.Markdown(EMPTY_SOURCES, elem_id="tr-sources")
                clear = gr.Button("Clear", elem_id="tr-clear")

        outputs = [chatbot, box, badge, plan, sources, status]
        inputs = [box, chatbot, mode]
        send.click(respond, inputs, outputs, api_name="chat", concurrency_limit=concurrency)
        box.submit(respond, inputs, outputs, api_name=False, concurrency_limit=concurrency)
        clear.click(
            lambda: ([], "", EMPTY_BADGE, EMPTY_PLAN, EMPTY_SOURCES, ""),
            None,
            outputs,
            api_name=False,
        )
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
    demo.launch(server_name=host, server_port=port, css=CSS, footer_links=[], show_error=True)

"""Turn the server's ``typed_rag`` object into the demo's badge, plan and sources.

Pure functions of plain dicts, so they can be tested without a browser.
"""

from __future__ import annotations

import html
from typing import Any

TYPE_COLOURS = {
    "EVIDENCE-BASED": "#2563eb",
    "COMPARISON": "#9333ea",
    "EXPERIENCE": "#0d9488",
    "REASON": "#ea580c",
    "INSTRUCTION": "#16a34a",
    "DEBATE": "#dc2626",
    "FACTOID": "#4b5563",
    "NOT-A-QUESTION": "#6b7280",
}

EMPTY_BADGE = '<div class="tr-badge-empty">Ask a question to see its type.</div>'
EMPTY_PLAN = "_No plan yet._"
EMPTY_SOURCES = "_No sources yet._"
# In the baseline modes the type is only reported, not used to pick a pipeline.
MODE_NOTES = {"llm": "LLM only: type not used", "rag": "plain RAG: type not used"}
SNIPPET_CHARS = 240  # CitedPassage.snippet length


def badge_html(info: dict[str, Any] | None) -> str:
    """The detected question type with its probability, coloured by type."""
    if not info:
        return EMPTY_BADGE
    qtype = info.get("type")
    mode = info.get("mode", "")
    if not qtype:
        label = MODE_NOTES.get(mode, "no type")
        return f'<span class="tr-badge" data-type="none" style="background:#6b7280">{label}</span>'
    prob = (info.get("probabilities") or {}).get(qtype)
    text = html.escape(qtype)
    if prob is not None:
        text += f" · {prob:.0%}"
    colour = TYPE_COLOURS.get(qtype, "#374151")
    note = ""
    source = info.get("type_source")
    predicted = info.get("predicted_type")
    if mode in MODE_NOTES:
        note = MODE_NOTES[mode]
    elif source == "forced":
        note = "forced by the request"
    elif source == "low-confidence-default" and predicted:
        pp = (info.get("probabilities") or {}).get(predicted)
        guess = f"{predicted} ({pp:.0%})" if pp is not None else predicted
        note = f"classifier unsure ({html.escape(guess)}), answered as plain RAG"
    elif source == "none":
        note = "no classifier: answered as plain RAG"
    note_html = f' <span class="tr-badge-note">{note}</span>' if note else ""
    return (
        f'<span class="tr-badge" data-type="{html.escape(qtype)}" '
        f'style="background:{colour}">{text}</span>{note_html}'
    )


def _bullets(items: list[Any]) -> list[str]:
    return [f"- {_inline(item)}" for item in items]


def _inline(value: Any) -> str:
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_inline(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(_inline(v) for v in value)
    return str(value)


def plan_markdown(info: dict[str, Any] | None) -> str:
    """The plan (sub-queries, perspectives, keywords, ...) and any fallbacks, as Markdown."""
    if not info:
        return EMPTY_PLAN
    plan = info.get("plan") or {}
    lines: list[str] = []
    rewrite = info.get("rewrite") or {}
    if rewrite.get("rewritten"):
        lines.append(f"**Follow-up understood as**: {rewrite.get('question', '')}")
        lines.append("")
    found = info.get("constraints") or {}
    if found.get("detected"):
        lines.append("**Coverage instructions**")
        lines.extend(f"- include: {t}" for t in found.get("include", []))
        lines.extend(f"- leave out: {t}" for t in found.get("exclude", []))
        lines.append("")
    for key, value in plan.items():
        title = key.replace("_", " ").capitalize()
        if isinstance(value, list):
            lines.append(f"**{title}**")
            lines.extend(_bullets(value))
        elif isinstance(value, dict):
            lines.append(f"**{title}**")
            lines.extend(f"- *{k}*: {_inline(v)}" for k, v in value.items())
        else:
            lines.append(f"**{title}**: {value}")
        lines.append("")
    subs = info.get("sub_answers") or []
    if subs:
        lines.append("**Sub-answers**")
        for sub in subs:
            head = sub.get("perspective") or sub.get("query", "")
            lines.append(f"- *{head}*: {str(sub.get('answer', ''))[:300]}")
    fallbacks = info.get("fallbacks") or []
    if fallbacks:
        lines.append("")
        lines.append("**Fallbacks**")
        lines.extend(_bullets(fallbacks))
    if not lines:
        if info.get("mode") in MODE_NOTES:
            return f"_No plan in {info['mode']} mode._"
        return "_No plan: this question type is answered directly._"
    return "\n".join(lines).strip()


def sources_markdown(info: dict[str, Any] | None) -> str:
    """Numbered sources, as the answer cites them: title, passage id and a snippet."""
    if not info:
        return EMPTY_SOURCES
    cites = info.get("citations") or []
    if not cites:
        return "_No passages were used for this answer._"
    parts = []
    for c in cites:
        raw = str(c.get("snippet", ""))
        snippet = " ".join(raw.split())
        if len(raw) >= SNIPPET_CHARS:  # the server cut it
            snippet += "…"
        parts.append(
            f"**[{c.get('citation')}] {c.get('title', '')}** `{c.get('id', '')}`  \n{snippet}"
        )
    return "\n\n".join(parts)


def apply_event(info: dict[str, Any], event: dict[str, Any]) -> dict[str, Any]:
    """Fold one progress event (a stream chunk's ``typed_rag`` with an ``event``) into ``info``,
    the same shape as the final ``typed_rag`` object, so the panels can show it live."""
    kind = event.get("event")
    if kind == "type":
        for key in (
            "mode",
            "type",
            "type_source",
            "predicted_type",
            "probabilities",
        ):
            if key in event:
                info[key] = event[key]
    elif kind == "plan":
        info.setdefault("plan", {}).update(event.get("plan") or {})
    elif kind == "sub_answer":
        info.setdefault("sub_answers", []).append(event)
    elif kind == "fallback":
        info.setdefault("fallbacks", []).append(event.get("note", ""))
    elif kind == "queued":
        info["queue_position"] = event.get("position")
    info["stage"] = kind
    return info


def _plan_items(plan: dict[str, Any]) -> list[str]:
    items: list[str] = []
    for key in ("sub_queries", "core_sub_questions", "keywords"):
        items.extend(str(v) for v in plan.get(key) or [])
    for p in plan.get("perspectives") or []:
        items.append(f"{p.get('perspective', '')}: {p.get('query', '')}")
    return items


def status_markdown(info: dict[str, Any], answering: bool = False) -> str:
    """Live status while a question runs: type, plan, finished sub-answers, what comes next."""
    blocks: list[str] = []
    qtype = info.get("type")
    stage = info.get("stage")
    if qtype:
        blocks.append(f"**Type:** {html.escape(str(qtype))}")
    plan = info.get("plan") or {}
    items = _plan_items(plan)
    if items:
        blocks.append("**Plan:** " + " · ".join(html.escape(i) for i in items))
    subs = info.get("sub_answers") or []
    total = max((int(s.get("total", 0)) for s in subs), default=0)
    done = []
    for sub in subs:
        head = sub.get("perspective") or sub.get("query", "")
        text = " ".join(str(sub.get("answer", "")).split())[:160]
        done.append(f"- ✓ *{html.escape(str(head))}*: {html.escape(text)}")
    if done:
        blocks.append("\n".join(done))
    if stage == "queued":
        blocks.append(f"_Waiting for the server: place {info.get('queue_position')} in the queue…_")
    elif answering or stage == "answer" or (total and len(subs) >= total):
        blocks.append("_Writing the answer…_")
    elif stage == "type":
        blocks.append("_Planning…_" if info.get("mode") == "typed-rag" else "_Retrieving…_")
    elif plan.get("sub_queries") or plan.get("perspectives"):
        blocks.append(f"_Answering sub-questions… {len(subs)}/{total or len(items)} done_")
    elif stage == "plan":
        blocks.append("_Retrieving…_")
    return "\n\n".join(blocks) if blocks else "_Working…_"

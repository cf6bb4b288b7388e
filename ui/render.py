"""Turn the server's ``typed_rag`` object into the demo's badge, plan and sources.

Pure functions of plain dicts, so they can be tested without a browser. The sources
panel is HTML: each source has the id :func:`source_id` that the answer's ``[n]`` links
(:func:`linkify`) point at, so a click highlights and scrolls to it (``ui.demo.HEAD``).
"""

from __future__ import annotations

import html
import re
from pathlib import PurePath
from typing import Any

from typed_rag.messages import CITATION_GROUP, cited_numbers

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


# --- sources and the answer's citation links ---------------------------------------------

_LINKED = re.compile(r"\[\[(\d+)\]\]\(#tr-src-\d+-\d+\)")


def source_id(turn: int, citation: int) -> str:
    """The HTML id of source ``citation`` of the answer at chat position ``turn``; the turn
    keeps an earlier answer's links from pointing at a later answer's sources."""
    return f"tr-src-{turn}-{citation}"


def linkify(answer: str, known: set[int] | list[int], turn: int) -> str:
    """The answer as Markdown whose ``[n]`` markers (``[2, 3]`` too) link to their source in
    the panel; numbers of no known source stay plain text."""
    known = set(known)

    def link(match: re.Match[str]) -> str:
        numbers = [int(d) for d in re.findall(r"\d+", match.group(1))]
        if not any(n in known for n in numbers):
            return match.group(0)
        return "".join(
            f"[[{n}]](#{source_id(turn, n)})" if n in known else f"[{n}]" for n in numbers
        )

    return CITATION_GROUP.sub(link, answer)


def unlinkify(text: str) -> str:
    """:func:`linkify` undone: the answer as the model wrote it (sent back as history)."""
    return _LINKED.sub(r"[\1]", text)


def source_list(info: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The sources known so far, by citation number: the final ``citations`` when the answer
    is done (each completed with its whole text from the ``sources`` events), else what the
    ``sources`` progress events brought."""
    if not info:
        return []
    live: dict[int, dict[str, Any]] = info.get("sources") or {}
    final = info.get("citations")
    if final is None:
        return [live[n] for n in sorted(live)]
    out = []
    for c in final:
        seen = live.get(int(c.get("citation", 0)), {})
        out.append({**seen, **{k: v for k, v in c.items() if v is not None}})
    return sorted(out, key=lambda c: int(c.get("citation", 0)))


def file_label(source: dict[str, Any]) -> str:
    """Where a document passage comes from, for people: ``manual.pdf · page 2 · Hydraulics``
    (the file's name only: the server names files relative to their collection, and a
    path of the server's would mean nothing to the user, nor open from a web page)."""
    path = source.get("source")
    if not path:
        return ""
    name = PurePath(str(path))
    parts = [name.name if name.is_absolute() else str(name)]
    if source.get("page") is not None:
        parts.append(f"page {source['page']}")
    if source.get("section"):
        parts.append(str(source["section"]))
    return " · ".join(parts)


def _snippet(source: dict[str, Any]) -> tuple[str, str]:
    """(the snippet shown, the whole passage when it is longer than the snippet, else "")."""
    text = str(source.get("text") or "")
    raw = text or str(source.get("snippet") or "")
    snippet = " ".join(raw[:SNIPPET_CHARS].split())
    if len(raw) >= SNIPPET_CHARS and (len(text) > SNIPPET_CHARS or not text):
        snippet += "…"  # there is more (the server cuts snippets at SNIPPET_CHARS)
    whole = " ".join(text.split()) if len(text) > SNIPPET_CHARS else ""
    return snippet, whole


def source_html(source: dict[str, Any], turn: int, cited: bool, show_query: bool = True) -> str:
    """One source: its number (a link to itself), title, file and page or passage id, the
    (sub-)query that found it, a snippet and the whole passage on click."""
    n = int(source.get("citation", 0))
    sid = source_id(turn, n)
    esc = html.escape
    head = (
        f'<div class="tr-src-head"><a class="tr-src-num" href="#{sid}">[{n}]</a> '
        f"<b>{esc(str(source.get('title', '')))}</b></div>"
    )
    label = file_label(source)
    if label:  # a document passage: where in which file (never a server path)
        where = f'<div class="tr-src-file" data-page="{esc(str(source.get("page") or ""))}">'
        where += f"{esc(label)}</div>"
    else:
        where = f'<div class="tr-src-file"><code>{esc(str(source.get("id", "")))}</code></div>'
    query = source.get("query")
    found = ""
    if query and show_query:
        found = f'<div class="tr-src-query">found for: <i>{esc(str(query))}</i></div>'
    snippet, whole = _snippet(source)
    body = f'<div class="tr-src-snippet">{esc(snippet)}</div>'
    if whole:
        body += (
            '<details class="tr-src-passage"><summary>the whole passage</summary>'
            f"<div>{esc(whole)}</div></details>"
        )
    return (
        f'<div class="tr-src" id="{sid}" data-citation="{n}" data-cited="{str(cited).lower()}">'
        f"{head}{where}{found}{body}</div>"
    )


def _note(text: str) -> str:
    return f'<div class="tr-src-note">{html.escape(text)}</div>'


def sources_html(
    info: dict[str, Any] | None, answer: str = "", turn: int = 0, final: bool = False
) -> str:
    """The sources panel: before the answer, every source found so far in number order;
    once it is written, the ones it cites first, in the order it cites them, and the
    others folded away (open while the answer is still streaming)."""
    sources = source_list(info)
    if not sources:
        if final or (info or {}).get("mode") == "llm":
            return _note("No passages were used for this answer.")
        if (info or {}).get("stage") == "queued":
            return _note("Waiting for the server…")
        return _note("Retrieving…") if info else _note("No sources yet.")
    by_number = {int(s.get("citation", 0)): s for s in sources}
    many = len({s.get("query") for s in sources}) > 1  # sub-queries: say which found it

    def one(source: dict[str, Any], cited: bool) -> str:
        return source_html(source, turn, cited, show_query=many)

    if not answer.strip():
        found = f"{len(sources)} source{'s' if len(sources) != 1 else ''} found"
        items = "".join(one(s, False) for s in sources)
        return f'<div class="tr-sources" data-turn="{turn}">{_note(found)}{items}</div>'
    order = [n for n in cited_numbers(answer) if n in by_number]
    cited = "".join(one(by_number[n], True) for n in order)
    rest = [s for s in sources if int(s.get("citation", 0)) not in order]
    folded = ""
    if rest:
        count = f"{len(rest)} source{'s' if len(rest) != 1 else ''}"
        summary = (
            f"{count}, none cited by the answer"
            if not order
            else f"{len(rest)} more {'source' if len(rest) == 1 else 'sources'} not cited"
        )
        if not final:
            summary = f"{count} not cited yet"
        items = "".join(one(s, False) for s in rest)
        folded = (
            f'<details class="tr-uncited"{"" if final else " open"}>'
            f"<summary>{html.escape(summary)}</summary>{items}</details>"
        )
    return f'<div class="tr-sources" data-turn="{turn}">{cited}{folded}</div>'


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
    elif kind == "sources":
        found = info.setdefault("sources", {})
        for passage in event.get("passages") or []:
            found.setdefault(int(passage.get("citation", 0)), dict(passage))
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
    found = len(info.get("sources") or {})
    if stage == "queued":
        blocks.append(f"_Waiting for the server: place {info.get('queue_position')} in the queue…_")
    elif stage == "check":
        blocks.append("_Checking the answer against its sources…_")
    elif answering or stage == "answer" or (total and len(subs) >= total):
        blocks.append("_Writing the answer…_")
    elif stage == "type":
        blocks.append("_Planning…_" if info.get("mode") == "typed-rag" else "_Retrieving…_")
    elif plan.get("sub_queries") or plan.get("perspectives"):
        blocks.append(f"_Answering sub-questions… {len(subs)}/{total or len(items)} done_")
    elif stage == "plan":
        blocks.append("_Retrieving…_")
    elif stage == "sources":
        blocks.append(f"_{found} source{'s' if found != 1 else ''} found; writing the answer…_")
    return "\n\n".join(blocks) if blocks else "_Working…_"


def checked_markdown(info: dict[str, Any]) -> str:
    """What the checks changed in a streamed answer after it was shown ("" when nothing)."""
    if not info.get("checked_answer"):
        return ""
    flagged = info.get("unverified") or []
    removed = sum(1 for u in flagged if u.get("removed"))
    recited = sum(1 for u in flagged if not u.get("removed") and u.get("recited") is not None)
    changes = [
        f"{n} sentence{'s' if n != 1 else ''} {what}"
        for n, what in ((removed, "removed (no shown passage supports it)"), (recited, "re-cited"))
        if n
    ]
    return (
        "_Checked against the sources: "
        + ("; ".join(changes) or "citations and layout corrected")
        + "._"
    )


def collection_choices(cards: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The collection picker's ``(label, name)`` pairs from ``GET /v1/collections``: the
    Wikipedia default first (always there), then each document collection with its size."""
    out: list[tuple[str, str]] = []
    for card in cards:
        name = str(card.get("id") or card.get("name") or "")
        if not name or any(name == value for _, value in out):
            continue
        bits = ["Wikipedia"] if card.get("kind") == "wikipedia" else []
        files = card.get("files")
        if files is not None:
            bits.append(f"{files} file{'s' if files != 1 else ''}")
        if card.get("passages") is not None:
            bits.append(f"{card['passages']:,} passages")
        if card.get("built") is False:
            bits.append("not built")
        out.append((f"{name} ({', '.join(bits)})" if bits else name, name))
    if not any(name == "wiki" for _, name in out):
        out.insert(0, ("wiki", "wiki"))
    return out

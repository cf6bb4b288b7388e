"""Prompt text a small model copies into its answer (``method.drop_echo``,
``method.drop_passage_copies``).

The 1.5B generator sometimes copies the prompt before its answer ("### Question ... ###
Answer") or goes on after it into a copy of a prompt section ("### References" with made-up
entries, "### How to write the answer" with the prompt's own instructions).
The prompts' section names (:data:`typed_rag.messages.PROMPT_HEADINGS`) tell such
text apart from the answer's own headings.
"""

from __future__ import annotations

import re

from typed_rag.messages import PROMPT_HEADINGS

_HEADING = re.compile(r"[ \t]*(#{1,6}[ \t]*)?(.+?)[ \t]*")
_NAMES = tuple(h.lower() for h in PROMPT_HEADINGS)


def _echoed(line: str) -> str | None:
    """The prompt heading a line copies ("### References:", "**References:**", a line that
    is just "References"), "answer" for an answer heading ("### Answer to ..."), else None.
    A line without "#" counts only when it is nothing but a heading's name."""
    m = _HEADING.fullmatch(line)
    if not m:
        return None
    name = m.group(2).strip("*: ").lower()
    if not m.group(1):
        return name if name in _NAMES else None
    if name.startswith("answer"):
        return "answer"
    return next((h for h in _NAMES if name == h or name.startswith(h + ":")), None)


def _statement_words(text: str) -> int:
    """Words on the lines of ``text`` that are not questions."""
    return sum(len(line.split()) for line in text.splitlines() if not line.rstrip().endswith("?"))


def drop_prompt_echo(answer: str, min_words: int = 10) -> str:
    """``answer`` without the prompt sections a small model copied into it.

    An answer that opens by copying the prompt (``### Question`` ...) keeps what follows its
    last answer heading (none: unchanged), one that opens with nothing but questions what
    follows its first answer heading; an answer that goes on into a copied section
    (``### References`` with made-up entries, ``### How to write the answer`` with the
    prompt's instructions) ends before it, unless fewer than ``min_words`` words of
    statements would be left (the heading then opens the answer's own content)."""
    lines = answer.split("\n")
    heads = [(i, h) for i, line in enumerate(lines) if (h := _echoed(line))]
    if not heads:
        return answer
    start = 0
    first = next(i for i, line in enumerate(lines) if line.strip())
    after = [i + 1 for i, h in heads if h == "answer"]
    if heads[0][0] == first and heads[0][1] != "answer":
        if not after or not "\n".join(lines[after[-1] :]).strip():
            return answer
        start = after[-1]
    elif (
        after
        and after[0] - 1 > first
        and not _statement_words("\n".join(lines[: after[0] - 1]))
        and "\n".join(lines[after[0] :]).strip()
    ):
        # only questions before an answer heading, and text after it: the core sub-questions
        # the prompt asks the model to work out, written out ("1. What is ...? ... ### Answer")
        start = after[0]
    for i, h in heads:
        if i >= start and h != "answer":
            kept = "\n".join(lines[start:i]).strip()
            if _statement_words(kept) >= min_words:
                return kept
    return "\n".join(lines[start:]).strip()


# A paragraph opening like one of the prompt's numbered passages, "[n] title" then its text
# (typed_rag.messages): "[3] Malta, a Southern European island country ...".
_PASSAGE_COPY = re.compile(r"[ \t]*\[\d+\][ \t]+[^\s\[]")
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")


def drop_passage_copies(answer: str) -> str:
    """``answer`` without the paragraphs after its first that copy a shown passage (they
    open with its ``[n]`` and text, as the prompt lists them), nor a paragraph ending in ":"
    that introduces them ("This is supported by the following references:"). The first
    paragraph is the answer's own, so it always stays."""
    paragraphs = _PARAGRAPH_BREAK.split(answer.strip())
    copies = {i for i, p in enumerate(paragraphs) if i and _PASSAGE_COPY.match(p)}
    if not copies:
        return answer
    lead_ins = {i - 1 for i in copies if i > 1 and paragraphs[i - 1].rstrip().endswith(":")}
    return "\n\n".join(p for i, p in enumerate(paragraphs) if i not in copies | lead_ins)

"""The answer checked against the passages it showed, after generation (issue 77).

Over documentation the answers that mislead are the ones that state a command, option, file
name or number the cited page does not give (``git reset HEAD <file>`` where the page says
``git reset --soft HEAD^``). Such a claim is checkable without a judge
(:mod:`typed_rag.finishing.code_spans`): every sentence whose technical spans no shown
passage holds is recorded, and with ``method.drop_unshown_spans`` removed, so what is left
states only commands and numbers the user can find in the cited pages.

The same step catches the other way a small model drifts from documentation: filler from its
own memory ("This helps in maintaining a consistent and organized codebase."), written
without a citation. An uncited sentence whose own words (those it does not take from the
question) are mostly absent from every shown passage is recorded the same way (``missing``:
the words no passage holds) and removed with it: a cited sentence is left to the citation
checks, a short one (a heading, "For example:") states nothing to check.

Last, a sentence that copies an instruction line of the prompt ("Cite the reference numbers
shown above ...", kind ``instruction``) says nothing about the documents, though it may carry
citations: it goes too, so an answer made only of such lines says the documents do not say
(the guard, :func:`~typed_rag.finishing.scaffolding.unscaffold`, keeps an answer it would
empty).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from typed_rag.finishing.code_spans import check_spans
from typed_rag.finishing.scaffolding import copied_instruction
from typed_rag.finishing.sentences import answer_pieces
from typed_rag.finishing.subanswers import content_words, stem
from typed_rag.messages import CITATION_GROUP
from typed_rag.result import Unverified, UnverifiedKind

FENCE = "```"
# An uncited sentence with at least this many words of its own must find this share of them
# in one shown passage (on the documentation devset's first answers, the filler sentences
# shared under 0.4, the cited ones mostly 0.7 and more: results/grounding/README.md).
OWN_WORDS_MIN = 3
OWN_WORDS_SHARE = 0.4


@dataclass
class Verified:
    answer: str
    unverified: list[Unverified]


def unshared_words(sentence: str, question: set[str], bags: Sequence[set[str]]) -> list[str]:
    """The words of an uncited ``sentence`` that no shown passage holds, when they are too
    many (:data:`OWN_WORDS_SHARE`); [] when it cites, is short, or a passage holds enough."""
    if not bags or CITATION_GROUP.search(sentence):  # no passage: nothing to check against
        return []
    own = {stem(w): w for w in content_words(sentence) if stem(w) not in question}
    if len(own) < OWN_WORDS_MIN:
        return []
    best = max(bags, key=lambda bag: len(own.keys() & bag), default=set())
    if len(own.keys() & best) >= OWN_WORDS_SHARE * len(own):
        return []
    return [w for key, w in own.items() if key not in best]


# The answer over documents when no sentence of the generated one is backed by a shown
# passage (every one states a span or words none holds): the passages are still shown.
DO_NOT_SAY = "The documents do not say:"  # how every such answer starts; never checked
UNSUPPORTED = (
    f"{DO_NOT_SAY} no shown passage supports an answer to this question; the passages found "
    "are listed below."
)

# After a code fence's line: a sentence that follows a closed block is a piece of its own
# (the sentence splitter sees no sentence end in "}\n```\n\nIn this example ...").
_FENCE_LINE_END = re.compile(r"(?<=```)(?=[ \t]*\n)")


def verify_answer(answer: str, passages: Sequence[str], question: str, drop: bool) -> Verified:
    """``answer`` with its unverified sentences found (spans no shown passage holds, an
    uncited sentence whose words none holds, or one copying a prompt instruction), and
    removed when ``drop`` says so; when every sentence would go, the answer is
    :data:`UNSUPPORTED` (the documents do not say), the removed text kept in the trace's
    ``unverified``. A sentence inside or across a fenced code block stays (recorded): cutting
    it would break the block."""
    if answer.startswith(DO_NOT_SAY):  # the route's own decline names what is missing
        return Verified(answer, [])
    pieces = [part for piece in answer_pieces(answer) for part in _FENCE_LINE_END.split(piece)]
    asked = {stem(w) for w in content_words(question)}
    bags = [{stem(w) for w in content_words(text)} for text in passages]
    found: list[tuple[int, Unverified]] = []
    in_fence = False
    for i, piece in enumerate(pieces):
        fences = piece.count(FENCE)
        # a piece that opens, closes or sits inside a code block is never cut: what is left
        # would be broken markdown (a fence without its pair)
        whole = not in_fence and fences % 2 == 0
        in_fence ^= fences % 2 == 1
        missing = list(check_spans(piece, passages).missing)
        kind: UnverifiedKind = "spans"
        if not missing and whole and fences == 0:
            if copied := copied_instruction(piece):
                missing, kind = [copied], "instruction"
            else:
                missing, kind = unshared_words(piece, asked, bags), "words"
        if missing:
            found.append((i, Unverified(sentence=piece.strip(), missing=missing, kind=kind)))
            found[-1][1].removed = whole  # provisional: confirmed below
    unverified = [u for _, u in found]
    gone = {i for i, u in found if u.removed}
    kept = join_kept(pieces, gone)
    if drop and gone and not kept.strip():  # nothing shown backs any of it: say so
        for u in unverified:
            u.removed = True
        return Verified(UNSUPPORTED, unverified)
    if not drop or not gone:
        for u in unverified:
            u.removed = False
        return Verified(answer, unverified)
    return Verified(re.sub(r"[ \t]+\n", "\n", kept).strip(), unverified)


def join_kept(pieces: Sequence[str], gone: set[int]) -> str:
    """The pieces not in ``gone``, joined; a removed piece's line break passes to the next
    kept piece, so a sentence after a code block does not land on its closing fence line."""
    out: list[str] = []
    brk = ""
    for i, piece in enumerate(pieces):
        lead = piece[: len(piece) - len(piece.lstrip())]
        if i in gone:
            brk = brk or (lead if "\n" in lead else "")
            continue
        if brk and "\n" not in lead:
            piece = brk + piece.lstrip(" \t")
        out.append(piece)
        brk = ""
    return "".join(out)

"""The answer's last step: its citations checked against the passages it was shown,
cleaned up as ``method.*`` says, and the run's total time recorded."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, fields

from typed_rag.finishing.citations import attach_citations, check_citations, strip_invalid
from typed_rag.finishing.echo import drop_passage_copies, drop_prompt_echo
from typed_rag.finishing.repeats import drop_repeats
from typed_rag.finishing.sentences import NOT_ABBREVIATION
from typed_rag.finishing.source_talk import is_source_talk
from typed_rag.method_settings import MethodOptions
from typed_rag.result import Result

# A sentence end: . ! or ? (not an initial's or abbreviation's full stop, with closing
# quotes or brackets) and any citation groups, before white space or the end of the text.
_SENTENCE_END = re.compile(rf"[.!?]{NOT_ABBREVIATION}[\"')\]*]*(?:[ \t]*\[[\d,; ]+\])*(?=\s|$)")
_LIST_MARKER = re.compile(r"(?:^|\n)[ \t]*\d{1,2}$")


def _sentence_ends(answer: str) -> list[re.Match[str]]:
    """The sentence ends of ``answer`` in order; a list marker ("3.") is not one."""
    return [
        m for m in _SENTENCE_END.finditer(answer) if not _LIST_MARKER.search(answer, 0, m.start())
    ]


def trim_to_sentence(answer: str) -> str:
    """``answer`` up to the end of its last complete sentence (with that sentence's
    citations); unchanged when it has none, so a cut-off answer never ends mid-word."""
    ends = _sentence_ends(answer)
    return answer[: ends[-1].end()].rstrip() if ends else answer


def first_sentences(answer: str, n: int) -> str:
    """``answer`` up to the end of its ``n``-th sentence (with its citations); unchanged
    when it has no more than ``n``."""
    ends = _sentence_ends(answer)
    return answer[: ends[n - 1].end()].rstrip() if len(ends) > n else answer


# A sentence about the closed-book draft, which the user never sees.
_DRAFT_TALK = re.compile(r"\bdraft (?:answer|response)s?\b", re.IGNORECASE)


def drop_sentences(answer: str, drop: Callable[[str], bool]) -> str:
    """``answer`` without the sentences (or list items) ``drop`` picks; unchanged when it
    picks every one."""
    starts = [0, *(m.end() for m in _sentence_ends(answer))]
    pieces = [answer[a:b] for a, b in zip(starts, [*starts[1:], len(answer)], strict=True)]
    kept = [p for p in pieces if not drop(p)]
    if len(kept) == len(pieces) or not "".join(kept).strip():
        return answer
    return re.sub(r"[ \t]+\n", "\n", "".join(kept)).strip()


def drop_draft_talk(answer: str) -> str:
    """``answer`` without the sentences that talk about "the draft answer"."""
    return drop_sentences(answer, lambda s: bool(_DRAFT_TALK.search(s)))


@dataclass
class Cut:
    """A finished answer after :func:`cut_answer`, and which cuts changed it."""

    answer: str
    unechoed: bool = False
    undrafted: bool = False
    unsourced: bool = False
    uncopied: bool = False
    unrepeated: bool = False
    trimmed: bool = False
    shortened: bool = False

    def flags(self) -> dict[str, bool]:
        """Which cuts changed the answer, by name: the trace fields of :class:`Result` (and
        of a replayed run's rows) that carry them."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "answer"}


def cut_answer(
    answer: str,
    *,
    drop_echo: bool,
    cut_off: bool,
    sentences: int | None = None,
    draft_talk: bool = False,
    source_talk: bool = False,
    passage_copies: bool = False,
    repeats: bool = False,
) -> Cut:
    """The cuts :func:`finish` makes to a typed-rag answer, in order: copied prompt sections
    dropped (``drop_echo``), an answer the token cap cut off (``cut_off``) ended at its last
    complete sentence, sentences about the draft dropped (``draft_talk``), sentences about
    the sources dropped (``source_talk``), paragraphs copying a shown passage dropped
    (``passage_copies``), sentences said again dropped (``repeats``), then only the first
    ``sentences`` kept. One function, so that ``benchmarks.trim_replay`` cuts stored answers
    exactly as the pipeline does."""
    cut = Cut(answer)
    if drop_echo:
        cut.answer = drop_prompt_echo(answer)
        cut.unechoed = cut.answer != answer
    if cut_off and answer.rstrip().endswith(cut.answer):  # not when the echo took the end
        trimmed = trim_to_sentence(cut.answer)
        cut.trimmed, cut.answer = trimmed != cut.answer, trimmed
    if draft_talk:
        undrafted = drop_draft_talk(cut.answer)
        cut.undrafted, cut.answer = undrafted != cut.answer, undrafted
    if source_talk:
        unsourced = drop_sentences(cut.answer, is_source_talk)
        cut.unsourced, cut.answer = unsourced != cut.answer, unsourced
    if passage_copies:
        uncopied = drop_passage_copies(cut.answer)
        cut.uncopied, cut.answer = uncopied != cut.answer, uncopied
    if repeats:
        unrepeated = drop_repeats(cut.answer)
        cut.unrepeated, cut.answer = unrepeated != cut.answer, unrepeated
    if sentences:
        short = first_sentences(cut.answer, sentences)
        cut.shortened, cut.answer = short != cut.answer, short
    return cut


def finish(result: Result, opts: MethodOptions, start: float, streamed: bool = False) -> Result:
    """Check the answer's citations against the shown passages, then close the timings.

    Invalid numbers are recorded. Not for a streamed answer (it is already sent): with
    ``method.strip_invalid_citations`` a typed-rag answer loses invalid numbers, with
    ``method.post_cite`` its uncited sentences get the passage that shares their words and
    citations whose passage shares too few are dropped; then :func:`cut_answer` cuts it
    as ``method.drop_echo``, ``method.trim_cut_off``, ``method.drop_draft_talk``,
    ``method.drop_source_talk``, ``method.drop_passage_copies``, ``method.drop_repeats`` and
    (factoid route) ``method.factoid_sentences`` say.
    """
    shown = {p.citation for p in result.passages}
    check = check_citations(result.answer, shown)
    result.invalid_citations = check.invalid
    if result.mode == "typed-rag" and not streamed:
        if check.invalid and opts.strip_invalid_citations:
            result.answer = strip_invalid(result.answer, shown).strip()
        if opts.post_cite:
            recited = attach_citations(
                result.answer,
                result.passages,
                opts.cite_min_share,
                opts.cite_floor_share,
                opts.cite_specifics,
            )
            result.answer = recited.answer
            result.added_citations, result.dropped_citations = recited.added, recited.dropped
        cut = cut_answer(
            result.answer,
            drop_echo=opts.drop_echo,
            cut_off=opts.trim_cut_off and result.finish_reason == "length",
            sentences=opts.factoid_sentences if result.type == "FACTOID" else None,
            draft_talk=opts.drop_draft_talk and "draft" in result.plan,
            source_talk=opts.drop_source_talk,
            passage_copies=opts.drop_passage_copies,
            repeats=opts.drop_repeats,
        )
        result.answer = cut.answer
        for name, cut_made in cut.flags().items():
            setattr(result, name, cut_made)
    result.citations = check_citations(result.answer, shown).valid
    result.timings["total"] = time.perf_counter() - start
    return result

"""The answer's last step: its citations checked against the passages it was shown,
cleaned up as ``method.*`` says, talk about the pipeline rewritten away, and the run's total
time recorded."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, fields

from typed_rag.finishing.citations import attach_citations, check_citations, strip_invalid
from typed_rag.finishing.echo import drop_passage_copies, drop_prompt_echo
from typed_rag.finishing.layout import tidy_layout
from typed_rag.finishing.scaffolding import add_kinds, unscaffold
from typed_rag.finishing.sentences import answer_pieces, sentence_ends
from typed_rag.finishing.verify import UNSUPPORTED, verify_answer
from typed_rag.method_settings import MethodOptions
from typed_rag.result import Result


def trim_to_sentence(answer: str) -> str:
    """``answer`` up to the end of its last complete sentence (with that sentence's
    citations); unchanged when it has none, so a cut-off answer never ends mid-word."""
    ends = sentence_ends(answer)
    return answer[: ends[-1].end()].rstrip() if ends else answer


# A sentence about the closed-book draft, which the user never sees.
_DRAFT_TALK = re.compile(r"\bdraft (?:answer|response)s?\b", re.IGNORECASE)


def drop_sentences(answer: str, drop: Callable[[str], bool]) -> str:
    """``answer`` without the sentences (or list items) ``drop`` picks; unchanged when it
    picks every one."""
    pieces = answer_pieces(answer)
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
    uncopied: bool = False
    trimmed: bool = False

    def flags(self) -> dict[str, bool]:
        """Which cuts changed the answer, by name: the trace fields of :class:`Result` (and
        of a replayed run's rows) that carry them."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "answer"}


def cut_answer(
    answer: str,
    *,
    drop_echo: bool,
    cut_off: bool,
    draft_talk: bool = False,
    passage_copies: bool = False,
) -> Cut:
    """The cuts :func:`finish` makes to a typed-rag answer, in order: copied prompt sections
    dropped (``drop_echo``), an answer the token cap cut off (``cut_off``) ended at its last
    complete sentence, sentences about the draft dropped (``draft_talk``), paragraphs
    copying a shown passage dropped (``passage_copies``). One function, so that stored
    answers can be re-finished exactly as the pipeline finishes them."""
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
    if passage_copies:
        uncopied = drop_passage_copies(cut.answer)
        cut.uncopied, cut.answer = uncopied != cut.answer, uncopied
    return cut


def finish(result: Result, opts: MethodOptions, start: float, streamed: bool = False) -> Result:
    """Check the answer's citations against the shown passages, then close the timings.

    Invalid numbers are recorded. Not for a streamed answer (it is already sent): with
    ``method.strip_invalid_citations`` a typed-rag answer loses invalid numbers, with
    ``method.post_cite`` its uncited sentences get the passage that shares their words and
    citations whose passage shares too few are dropped; then :func:`cut_answer` cuts it
    as ``method.drop_echo``, ``method.trim_cut_off``, ``method.drop_draft_talk`` and
    ``method.drop_passage_copies`` say. In every mode, talk about the pipeline ("Perspective
    1", "the references provided") is rewritten away (:func:`unscaffold`); a streamed answer was
    rewritten as it streamed (:func:`unscaffold_stream`), and what is left is recorded.
    Last, sentences stating spans no shown passage holds, and uncited ones whose words none
    holds, are recorded, and removed from a typed-rag answer over documents, not streamed,
    under ``method.drop_unshown_spans`` (:func:`verify_answer`); then, not streamed, question
    headings left empty are dropped and ordered lists renumbered (:func:`tidy_layout`).
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
            )
            result.answer = recited.answer
            result.added_citations, result.dropped_citations = recited.added, recited.dropped
        cut = cut_answer(
            result.answer,
            drop_echo=opts.drop_echo,
            cut_off=opts.trim_cut_off and result.finish_reason == "length",
            draft_talk=opts.drop_draft_talk and "draft" in result.plan,
            passage_copies=opts.drop_passage_copies,
        )
        result.answer = cut.answer
        for name, cut_made in cut.flags().items():
            setattr(result, name, cut_made)
    last_checks(result, opts, streamed)
    result.timings["total"] = time.perf_counter() - start
    return result


def checked_against_documents(result: Result) -> bool:
    """Whether the checks that remove sentences (``drop_unshown_spans``, ``support_check``)
    act on ``result``: a typed-rag answer over documents (streamed, it is finished as if it
    were not, and the checked text follows what was sent). Over Wikipedia a REASON or factoid
    answer adds from memory (the closed-book draft) on purpose, dates and numbers included."""
    return result.mode == "typed-rag" and result.corpus == "documents"


def amendment_note(result: Result) -> str:
    """What the checks of a streamed answer removed or re-cited, as text to send after it
    (a client that reads only the streamed text learns of it); empty when they only
    changed citations or layout."""
    lines = []
    for u in result.unverified:
        sentence = " ".join(u.sentence.split())
        sentence = sentence if len(sentence) <= 160 else sentence[:157] + "..."
        if u.removed:
            lines.append(f'- removed: "{sentence}" (no shown passage supports it)')
        elif u.recited is not None:
            lines.append(f'- "{sentence}" is supported by [{u.recited}], not by what it cites')
    if not lines:
        return ""
    return "\n\n*Checked against the shown passages after it was sent:*\n" + "\n".join(lines)


def last_checks(result: Result, opts: MethodOptions, streamed: bool = False) -> None:
    """The steps that need only the finished answer and its shown passages, so a stored
    answer can be re-finished by them (``eval refinish``): talk about the pipeline rewritten
    away, then the verification (:func:`verify_answer`), then, after the last removal, the
    layout tidied (:func:`tidy_layout`: question headings left with nothing under them
    dropped, ordered lists renumbered), then the valid citations. A streamed answer's
    layout is left as it was sent."""
    shown = {p.citation for p in result.passages}
    guard = unscaffold(result.answer)
    if streamed:  # rewritten as it streamed when the option is on (unscaffold_stream)
        add_kinds(result.scaffolding, guard.found)
    else:  # recorded always; rewritten only when the option is on
        result.scaffolding = guard.found
        if opts.drop_scaffolding:
            result.unscaffolded = guard.answer != result.answer
            result.answer = guard.answer
    drop = opts.drop_unshown_spans and checked_against_documents(result) and not streamed
    verified = verify_answer(
        result.answer, [p.text for p in result.passages], result.question, drop
    )
    if verified.answer == UNSUPPORTED and result.answer != UNSUPPORTED:
        result.fallbacks.append(
            "verification: no sentence is backed by a shown passage -> the documents do not say"
        )
    result.answer, result.unverified = verified.answer, verified.unverified
    if not streamed:
        result.answer = tidy_layout(result.answer)
    result.citations = check_citations(result.answer, shown).valid

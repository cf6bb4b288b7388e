"""Faithfulness of a run's answers to the passages they show (issue 77), per method.

Over a development set written from a document collection (``eval devset --collection``),
each answer of an ``eval run`` is measured against what it was shown:

- ``supported_share``: cited sentences the support judge finds supported by a passage they
  cite (:mod:`eval.citation_support`, P(yes) >= 0.5), pooled over answers;
- ``uncited_share``: sentences that cite nothing, of all sentences;
- ``contradiction_share``: cited sentences that a passage they cite *contradicts*, asked of
  the same judge as a separate yes/no question (a sentence can be unsupported without being
  contradicted; a contradicted one is the worse failure, counted apart), counted only where
  the support judge also finds the sentence unsupported: alone, the 1.5B judge called 83% of
  sentences written from the passage contradicted, gated it calls none of them and 42% of
  negated ones (``eval grounding-validity``, ``gated``);
- ``code_span_faithful_share``: answers whose every command, option, file name, identifier
  and number occurs in a shown passage (:mod:`typed_rag.finishing.code_spans`), of the answers
  with any;
- ``unanswerable_declined_share``: answers to the questions the collection cannot answer
  (``"answerable": false``) that say the documents do not hold the answer (:func:`declines`);
- ``mrr``: LINKAGE's mean reciprocal rank of the answerable questions (the run's scores).

The first five are over answerable questions except the declines; ``llm`` answers show no
passages, so only their declines and MRR are measured.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from eval.citation_support import CitedSentence
from typed_rag.finishing.citations import cited_sentences, split_sentences
from typed_rag.finishing.code_spans import check_spans

CONTRADICTION_PROMPT = (
    "Does the passage contradict the statement? Answer yes only if the passage says the "
    "opposite of the statement or something that cannot be true together with it; answer no "
    'if the passage agrees with it or does not say. Reply "[[yes]]" or "[[no]]".'
)
CONTRADICTIONS = "contradiction.jsonl"

# An answer that says the shown documents do not hold what was asked. It must name the
# sources (the documents, passages, references, context) or say "no information": a plain
# "X does not provide Y" is a statement about X, not a decline. (The runtime's
# finishing.subanswers.says_unknown is broader on purpose, for dropping empty sub-answers;
# counted as a decline here, an invented "X does not provide Y" would pass as one.)
_SOURCES = r"(?:documents?|documentation|passages?|references?|sources?|context|provided text)"
_DECLINE = re.compile(
    rf"\b{_SOURCES}\b[^.]{{0,60}}?\b(?:do(?:es)? not|don't|doesn't|never|fail to)\s+"
    r"(?:say|mention|cover|describe|explain|contain|provide|state|include|address|give|discuss)"
    rf"|\bnot (?:mentioned|covered|described|addressed|provided|stated|given|found) in the {_SOURCES}"
    r"|\bno (?:information|mention|details?|answer)\b[^.]{0,30}\b(?:about|on|of|for|regarding|in)\b"
    rf"|\b(?:cannot|can't|could not|unable to) (?:find|answer|tell|determine)\b[^.]{{0,40}}\b{_SOURCES}\b",
    re.IGNORECASE,
)


def declines(answer: str) -> bool:
    """Whether the answer says the documents it was given do not hold the answer."""
    return _DECLINE.search(answer) is not None


def _share(num: int, den: int) -> float | None:
    return num / den if den else None


def method_row(
    method: str,
    answers: Sequence[Mapping[str, Any]],
    answerable: Mapping[str, bool],
    support: Mapping[tuple[str, str, str], bool | None],
    contradiction: Mapping[tuple[str, str, str], bool | None],
    ranks: Mapping[str, int | None],
    texts: Mapping[str, str],
) -> dict[str, Any]:
    """One summary row. ``support``/``contradiction``: (method, question id, sentence) ->
    verdict of each cited sentence; ``ranks``: question id -> LINKAGE rank; ``texts``: passage
    id -> text."""
    mine = [a for a in answers if a["method"] == method]
    inside = [a for a in mine if answerable.get(str(a["question_id"]), True)]
    outside = [a for a in mine if not answerable.get(str(a["question_id"]), True)]
    sentences = cited = 0
    judged = supported = judged_c = contra = 0
    span_answers = span_faithful = 0
    for a in inside:
        text = str(a.get("answer") or "")
        qid = str(a["question_id"])
        sentences += len(split_sentences(text))
        for sentence, _ in cited_sentences(text):
            cited += 1
            upheld = support.get((method, qid, sentence))
            if upheld is not None:
                judged, supported = judged + 1, supported + int(upheld)
            if (verdict := contradiction.get((method, qid, sentence))) is not None:
                judged_c, contra = judged_c + 1, contra + int(verdict and upheld is False)
        shown = [texts.get(str(p["id"]), "") for p in (a.get("result") or {}).get("passages") or []]
        check = check_spans(text, shown)
        if check.spans:
            span_answers += 1
            span_faithful += int(check.faithful)
    rr = [1.0 / r for a in inside if (r := ranks.get(str(a["question_id"])))]
    return {
        "method": method,
        "n": len(inside),
        "n_unanswerable": len(outside),
        "supported_share": _share(supported, judged),
        "uncited_share": _share(sentences - cited, sentences) if method != "llm" else None,
        "contradiction_share": _share(contra, judged_c),
        "code_span_faithful_share": _share(span_faithful, span_answers),
        "unanswerable_declined_share": _share(
            sum(declines(str(a.get("answer") or "")) for a in outside), len(outside)
        ),
        "mrr": sum(rr) / len(rr) if rr else None,
        "sentences": sentences,
        "cited_sentences": cited,
        "judged": judged,
        "answers_with_spans": span_answers,
    }


def answer_record(
    answer: Mapping[str, Any], answerable: bool, rank: int | None, texts: Mapping[str, str]
) -> dict[str, Any]:
    """One answer's judge-free measures, to commit beside the summary (and read by eye):
    its text, LINKAGE rank, the spans no shown passage holds, its uncited sentences and,
    for an unanswerable question, whether it declined."""
    text = str(answer.get("answer") or "")
    result = answer.get("result") or {}
    shown = [texts.get(str(p["id"]), "") for p in result.get("passages") or []]
    cited = {s for s, _ in cited_sentences(text)}
    return {
        "question_id": str(answer["question_id"]),
        "method": answer["method"],
        "type": answer.get("type"),
        "route": result.get("type"),
        "question": answer.get("question"),
        "answerable": answerable,
        "rank": rank,
        "answer": text,
        "spans_missing": list(check_spans(text, shown).missing),
        "uncited": [s for s in split_sentences(text) if s not in cited],
        "declined": declines(text) if not answerable else None,
        "removed_sentences": [
            u["sentence"] for u in result.get("unverified") or [] if u.get("removed")
        ],
    }


def verdicts_by_sentence(
    sentences: Sequence[CitedSentence], rows: Sequence[Mapping[str, Any]]
) -> dict[tuple[str, str, str], bool | None]:
    """(method, question id, sentence) -> the verdict of a sentence row of
    :meth:`eval.citation_support.SupportRun.sentence_rows` (its ``supported``: P(yes) >= 0.5
    for a passage it cites, whichever question was asked)."""
    return {
        (s.method, s.question_id, s.sentence): r["supported"]
        for s, r in zip(sentences, rows, strict=True)
    }

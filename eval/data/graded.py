"""Your own graded questions (``eval run --data FILE.jsonl``) as the records Wiki-NFQA gives.

One JSON object per line::

    {"id": "q1", "question": "...", "subset": "support", "type": "REASON",
     "references": [{"grade": 3, "text": "..."}, {"grade": 0, "text": "..."}]}

``subset`` (default ``custom``) groups the report as Wiki-NFQA's subsets do; ``type``
(an nf-cats label) routes the question instead of the classifier's label; each
reference's ``grade`` is 3 (best) .. 0 (wrong), with at least two distinct grades, so
that LINKAGE draws one reference per grade with the fixed seed exactly as it does for
Wiki-NFQA. A question written to be *unanswerable* from the searched documents
(``"answerable": false``, from ``eval devset --unanswerable-from``) needs no references: it
is measured by whether the answer declines (``eval grounding``), and LINKAGE does not rank
it. Each line becomes a :class:`WikiNFQARecord`, so every later step (labels,
selection, answering, judging, reports) runs unchanged. A bad line is reported by file,
line and reason; nothing is scored from a file with one.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from eval.data.labels import QuestionLabel
from eval.data.wikinfqa import LABEL_RANGE, MIN_LEVELS, BadRecord, WikiNFQA, WikiNFQARecord
from typed_rag.errors import UserError
from typed_rag.types import QuestionType

DEFAULT_SUBSET = "custom"
# Subset names go into --subsets lists and report tables: no commas, bars or spaces.
_SUBSET_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_SHOWN = 20  # bad lines listed in one error


@dataclass(frozen=True)
class BadLine(BadRecord):
    """A line of a graded file that failed its check: file, line, id when known, reason."""

    def __str__(self) -> str:
        named = f" id {self.question_id!r}:" if self.question_id else ""
        return f"{self.path}:{self.line}:{named} {self.reason}"


@dataclass
class GradedData(WikiNFQA):
    """Loaded graded questions, the file they came from, and the types the file gives."""

    path: Path = Path()
    sha256: str = ""
    types: dict[str, str] = field(default_factory=dict)

    def source(self) -> dict[str, str]:
        """What a run manifest records of the file: its path and content hash."""
        return {"path": str(self.path.resolve()), "sha256": self.sha256}

    def given_labels(self) -> dict[str, QuestionLabel]:
        """The file's types as sure labels, so they route their questions."""
        subset = {r.question_id: r.subset for r in self.records}
        return {
            qid: QuestionLabel(qid, subset[qid], t, 1.0, True)
            for qid, t in self.types.items()
            if qid in subset
        }


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_graded(
    path: str | Path,
    subsets: str | Sequence[str] | None = None,
    on_error: Literal["skip", "stop"] = "stop",
) -> GradedData:
    """Read and check every line of ``path``; keep the ``subsets`` named (None or "all": all).

    ``on_error="stop"`` raises one :class:`UserError` listing every bad line;
    ``"skip"`` drops them (listed in ``GradedData.bad``).
    """
    path = Path(path)
    if not path.is_file():
        raise UserError(f"graded data file not found: {path}")
    out = GradedData(path=path, sha256=file_sha256(path))
    first_line: dict[str, int] = {}
    try:
        with path.open(encoding="utf-8") as f:
            lines = list(enumerate(f, start=1))
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    for lineno, raw in lines:
        if not raw.strip():
            continue
        record, type_, reason, qid = parse_line(raw, lineno)
        if record is not None and record.question_id in first_line:
            reason = f"duplicate id (first on line {first_line[record.question_id]})"
            record = None
        if record is None:
            out.bad.append(BadLine(path, lineno, qid, reason or "invalid record"))
            continue
        first_line[record.question_id] = lineno
        out.records.append(record)
        if type_ is not None:
            out.types[record.question_id] = type_
    if out.bad and on_error == "stop":
        shown = "\n".join(f"  {b}" for b in out.bad[:_SHOWN])
        more = f"\n  ... and {len(out.bad) - _SHOWN} more" if len(out.bad) > _SHOWN else ""
        raise UserError(
            f"{path}: {len(out.bad)} bad line(s) (the format: docs/evaluation.md, "
            f"'Evaluate on your own questions'):\n{shown}{more}"
        )
    wanted = _subsets(out, subsets)
    out.records = [r for r in out.records if r.subset in wanted]
    out.types = {q: t for q, t in out.types.items() if q in {r.question_id for r in out.records}}
    return out


def _subsets(data: GradedData, value: str | Sequence[str] | None) -> set[str]:
    present = {r.subset for r in data.records}
    if value is None:
        return present
    names = value.split(",") if isinstance(value, str) else list(value)
    names = [n.strip() for n in names if n.strip()]
    if not names or names == ["all"]:
        return present
    unknown = sorted(set(names) - present)
    if unknown:
        raise UserError(
            f"subset(s) {', '.join(unknown)} not in {data.path}; it has: "
            + ", ".join(sorted(present))
        )
    return set(names)


def parse_line(
    raw: str, lineno: int
) -> tuple[WikiNFQARecord | None, str | None, str | None, str | None]:
    """(record, type or None, None, id) for a good line, else (None, None, reason, id-if-known)."""
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as exc:
        return None, None, f"not valid JSON ({exc.msg} at column {exc.colno})", None
    if not isinstance(obj, dict):
        return None, None, "not a JSON object", None
    qid = obj.get("id")
    if isinstance(qid, int) and not isinstance(qid, bool):
        qid = str(qid)
    if not isinstance(qid, str) or not qid.strip():
        return None, None, "missing or empty id (a string)", None
    qid = qid.strip()
    reason = _check(obj)
    if reason:
        return None, None, reason, qid
    refs = obj.get("references") or []
    type_ = obj.get("type")
    record = WikiNFQARecord(
        subset=(obj.get("subset") or DEFAULT_SUBSET).strip(),
        question_id=qid,
        question=obj["question"].strip(),
        answers=tuple(r["text"] for r in refs),
        labels=tuple(r["grade"] for r in refs),
        line=lineno,
        answerable=obj.get("answerable", True),
    )
    return record, QuestionType.parse(type_).value if type_ is not None else None, None, qid


def _check(obj: dict[str, Any]) -> str | None:
    question = obj.get("question")
    if not isinstance(question, str) or not question.strip():
        return "missing or empty question"
    subset = obj.get("subset")
    if subset is not None and (not isinstance(subset, str) or not _SUBSET_RE.match(subset)):
        return f"subset={subset!r} is not a name of letters, digits, '.', '_' or '-'"
    type_ = obj.get("type")
    if type_ is not None:
        if not isinstance(type_, str):
            return f"type={type_!r} is not a string"
        try:
            QuestionType.parse(type_)
        except ValueError as exc:
            return str(exc)
    answerable = obj.get("answerable", True)
    if not isinstance(answerable, bool):
        return f"answerable={answerable!r} is not true or false"
    if not answerable and not obj.get("references"):
        return None
    return _check_references(obj.get("references"))


def _check_references(refs: Any) -> str | None:
    if refs is None:
        return "missing references"
    if not isinstance(refs, list) or not refs:
        return "references must be a non-empty list of {grade, text} objects"
    for i, ref in enumerate(refs):
        if not isinstance(ref, dict):
            return f"references[{i}] is not a {{grade, text}} object"
        grade = ref.get("grade")
        if isinstance(grade, bool) or not isinstance(grade, int) or grade not in LABEL_RANGE:
            return f"references[{i}].grade={grade!r} is not an integer in 0..3"
        text = ref.get("text")
        if not isinstance(text, str) or not text.strip():
            return f"references[{i}].text is missing or empty"
    levels = len({ref["grade"] for ref in refs})
    if levels < MIN_LEVELS:
        return f"only {levels} distinct grade(s); LINKAGE needs at least {MIN_LEVELS}"
    return None


def data_source(data: WikiNFQA) -> dict[str, str] | None:
    """The manifest entry of a graded file's run; None for Wiki-NFQA (its manifest is unchanged)."""
    return data.source() if isinstance(data, GradedData) else None


def given_labels(data: WikiNFQA) -> dict[str, QuestionLabel] | None:
    """The types a graded file gives (they override stored labels); None for Wiki-NFQA."""
    return data.given_labels() if isinstance(data, GradedData) else None

"""Wiki-NFQA: read and validate the six subsets before anything is scored.

A record that cannot give a LINKAGE reference list (lengths that disagree,
a label outside 0..3, fewer than two quality levels, an empty answer) would
silently skew the scores, so every record is checked and a bad one is
reported by file, line and question id: skipped and counted, or an error.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from typed_rag.errors import UserError

log = logging.getLogger(__name__)

# In the order of the paper's Table 3.
SUBSETS: tuple[str, ...] = ("nq", "squad", "trivia", "2wikimultihopqa", "hotpotqa", "musique")
SUBSET_TITLES: dict[str, str] = {
    "nq": "NQ",
    "squad": "SQuAD",
    "trivia": "TriviaQA",
    "2wikimultihopqa": "2WikiMQA",
    "hotpotqa": "HotpotQA",
    "musique": "MuSiQue",
}
FILE_NAME = "annotated_odqa_nf_test.jsonl"
LABEL_RANGE = range(0, 4)  # 3 = best ... 0 = irrelevant/incorrect
MIN_LEVELS = 2  # a reference list needs at least two quality levels


@dataclass(frozen=True)
class WikiNFQARecord:
    """One question with its graded answers (``labels[i]`` grades ``answers[i]``)."""

    subset: str
    question_id: str
    question: str
    answers: tuple[str, ...]
    labels: tuple[int, ...]
    line: int = 0
    # The source dataset's short answers (``answer_dict["ground_truth"]``): a judge-free
    # check of whether an answer states the fact the question is about.
    gold: tuple[str, ...] = ()
    # False: written from documents the answers are not searched in; not ranked by LINKAGE.
    answerable: bool = True

    @property
    def levels(self) -> int:
        return len(set(self.labels))


@dataclass(frozen=True)
class BadRecord:
    """A record that failed validation, and why."""

    path: Path
    line: int
    question_id: str | None
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.question_id or '<no question_id>'}: {self.reason}"


@dataclass
class WikiNFQA:
    """The loaded questions plus the records that were skipped."""

    records: list[WikiNFQARecord] = field(default_factory=list)
    bad: list[BadRecord] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.records)

    def by_id(self) -> dict[str, WikiNFQARecord]:
        return {r.question_id: r for r in self.records}

    def counts(self) -> dict[str, int]:
        out = {s: 0 for s in SUBSETS}
        for r in self.records:
            out[r.subset] = out.get(r.subset, 0) + 1
        return {s: n for s, n in out.items() if n}


def parse_subsets(value: str | Sequence[str] | None) -> list[str]:
    """``"nq,squad"`` or a list -> validated subset names; None or "all" -> all six."""
    if value is None:
        return list(SUBSETS)
    names = value.split(",") if isinstance(value, str) else list(value)
    names = [n.strip().lower() for n in names if n.strip()]
    if not names or names == ["all"]:
        return list(SUBSETS)
    unknown = [n for n in names if n not in SUBSETS]
    if unknown:
        raise UserError(
            f"unknown Wiki-NFQA subset(s) {', '.join(unknown)}; expected some of: {', '.join(SUBSETS)}"
        )
    return list(dict.fromkeys(names))


def subset_path(data_dir: Path, subset: str) -> Path:
    return Path(data_dir) / subset / FILE_NAME


def load_wikinfqa(
    data_dir: str | Path,
    subsets: str | Sequence[str] | None = None,
    on_error: Literal["skip", "stop"] = "skip",
) -> WikiNFQA:
    """Load and validate the given subsets from ``data_dir/<subset>/annotated_odqa_nf_test.jsonl``.

    ``on_error="skip"`` drops bad records (listed in ``WikiNFQA.bad`` and logged);
    ``"stop"`` raises :class:`UserError` at the first one.
    """
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise UserError(f"Wiki-NFQA data directory not found: {data_dir} (set eval.data_dir)")
    out = WikiNFQA()
    seen: dict[str, str] = {}
    for subset in parse_subsets(subsets):
        path = subset_path(data_dir, subset)
        if not path.is_file():
            raise UserError(f"Wiki-NFQA subset {subset!r} not found: expected {path}")
        for lineno, raw in _lines(path):
            record, reason, qid = _validate(subset, raw, lineno)
            if record is not None and record.question_id in seen:
                reason = f"duplicate question_id (first seen in {seen[record.question_id]})"
                record = None
            if record is None:
                bad = BadRecord(path, lineno, qid, reason or "invalid record")
                if on_error == "stop":
                    raise UserError(f"bad Wiki-NFQA record: {bad}")
                out.bad.append(bad)
                continue
            seen[record.question_id] = f"{path}:{lineno}"
            out.records.append(record)
    if out.bad:
        log.warning("skipped %d bad Wiki-NFQA record(s); first: %s", len(out.bad), out.bad[0])
    return out


def _lines(path: Path) -> Iterable[tuple[int, str]]:
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if line.strip():
                yield lineno, line


def _validate(
    subset: str, raw: str, lineno: int
) -> tuple[WikiNFQARecord | None, str | None, str | None]:
    """Return (record, None, id) when valid, else (None, reason, id-if-known)."""
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as exc:
        return None, f"not valid JSON ({exc.msg} at column {exc.colno})", None
    if not isinstance(obj, dict):
        return None, "not a JSON object", None
    qid = obj.get("question_id")
    if not isinstance(qid, str) or not qid.strip():
        return None, "missing or empty question_id", None
    reason = _check_fields(obj)
    if reason:
        return None, reason, qid
    record = WikiNFQARecord(
        subset=subset,
        question_id=qid,
        question=obj["question_text"].strip(),
        answers=tuple(obj["answer_list"]),
        labels=tuple(obj["answer_label"]),
        line=lineno,
        gold=_gold_answers(obj.get("answer_dict")),
    )
    return record, None, qid


def _check_fields(obj: dict[str, Any]) -> str | None:
    question = obj.get("question_text")
    if not isinstance(question, str) or not question.strip():
        return "missing or empty question_text"
    answers = obj.get("answer_list")
    labels = obj.get("answer_label")
    num = obj.get("num_answers")
    if not isinstance(answers, list) or not answers:
        return "answer_list must be a non-empty list"
    if not isinstance(labels, list):
        return "answer_label must be a list"
    for i, a in enumerate(answers):
        if not isinstance(a, str) or not a.strip():
            return f"answer_list[{i}] is not a non-empty string"
    for i, lab in enumerate(labels):
        if isinstance(lab, bool) or not isinstance(lab, int) or lab not in LABEL_RANGE:
            return f"answer_label[{i}]={lab!r} is not an integer in 0..3"
    if len(answers) != len(labels):
        return f"answer_list has {len(answers)} answers but answer_label has {len(labels)} labels"
    if num is not None and (isinstance(num, bool) or num != len(answers)):
        return f"num_answers={num!r} but answer_list has {len(answers)} answers"
    if "answer_dict" in obj:
        flat = _flatten_answer_dict(obj["answer_dict"])
        if flat is None:
            return "answer_dict must map model -> {answerN: text}"
        if flat != answers:
            return "answer_list does not match answer_dict flattened in order"
    levels = len(set(labels))
    if levels < MIN_LEVELS:
        return f"only {levels} distinct quality label(s); a reference list needs {MIN_LEVELS}"
    return None


def _gold_answers(answer_dict: Any) -> tuple[str, ...]:
    truth = answer_dict.get("ground_truth") if isinstance(answer_dict, dict) else None
    if not isinstance(truth, dict):
        return ()
    return tuple(t.strip() for t in truth.values() if isinstance(t, str) and t.strip())


def _flatten_answer_dict(value: Any) -> list[str] | None:
    if not isinstance(value, dict):
        return None
    out: list[str] = []
    for answers in value.values():
        if not isinstance(answers, dict):
            return None
        out.extend(answers.values())
    return out

"""Question types for Wiki-NFQA, from the project's own classifier.

The benchmark files carry no type (the paper's came from nf-cats predictions
that were not released), so the per-type report needs ours. Labels are
stored once (JSON, plus a CSV for people) and reused by every run, so all
methods of all runs are grouped the same way.
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from eval.data.wikinfqa import WikiNFQARecord
from typed_rag.classifier.base import TypeClassifier
from typed_rag.config import Settings
from typed_rag.errors import UserError
from typed_rag.types import QuestionType

# Table 3 of the paper: the six types of its 945 questions.
PAPER_TYPE_COUNTS: dict[str, int] = {
    QuestionType.EVIDENCE_BASED.value: 555,
    QuestionType.REASON.value: 218,
    QuestionType.INSTRUCTION.value: 49,
    QuestionType.DEBATE.value: 46,
    QuestionType.EXPERIENCE.value: 41,
    QuestionType.COMPARISON.value: 36,
}
# Figure 4's order of the types.
REPORT_TYPE_ORDER: tuple[str, ...] = (
    QuestionType.EVIDENCE_BASED.value,
    QuestionType.COMPARISON.value,
    QuestionType.EXPERIENCE.value,
    QuestionType.REASON.value,
    QuestionType.INSTRUCTION.value,
    QuestionType.DEBATE.value,
    QuestionType.FACTOID.value,
    QuestionType.NOT_A_QUESTION.value,
)
UNLABELLED = "UNLABELLED"
# Wiki-NFQA is non-factoid by construction (the paper's counts cover these six types
# only), so an evaluation types its questions by the classifier's argmax over them.
NONFACTOID_TYPES: tuple[str, ...] = tuple(PAPER_TYPE_COUNTS)


@dataclass(frozen=True)
class QuestionLabel:
    """The classifier's top type for one question, its probability and whether it was sure."""

    question_id: str
    subset: str
    type: str
    probability: float
    confident: bool


def default_labels_path(settings: Settings) -> Path:
    return settings.home / "eval" / "wikinfqa-labels.json"


def classify_questions(
    records: Sequence[WikiNFQARecord],
    classifier: TypeClassifier,
    min_confidence: float = 0.0,
    batch_size: int = 256,
    allowed: Sequence[str] | None = NONFACTOID_TYPES,
) -> dict[str, QuestionLabel]:
    """The type of every question, in batches: the argmax over ``allowed`` labels (all eight
    when None); ``confident`` compares the renormalised probability with ``min_confidence``."""
    out: dict[str, QuestionLabel] = {}
    for start in range(0, len(records), batch_size):
        chunk = records[start : start + batch_size]
        preds = classifier.predict([r.question for r in chunk], min_confidence, allowed=allowed)
        if len(preds) != len(chunk):
            raise RuntimeError(
                f"classifier returned {len(preds)} predictions for {len(chunk)} questions"
            )
        for rec, pred in zip(chunk, preds, strict=True):
            out[rec.question_id] = QuestionLabel(
                question_id=rec.question_id,
                subset=rec.subset,
                type=pred.type.value,
                probability=round(float(pred.top_probability), 6),
                confident=bool(pred.confident),
            )
    return out


def save_labels(labels: Mapping[str, QuestionLabel], path: Path, source: str = "") -> Path:
    """Write ``path`` (JSON) and the same rows as ``path.with_suffix('.csv')``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"source": source, "labels": [asdict(lab) for lab in labels.values()]}
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(payload, indent=1), encoding="utf-8")
    tmp.replace(path)
    with path.with_suffix(".csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["question_id", "subset", "type", "probability", "confident"])
        for lab in labels.values():
            writer.writerow([lab.question_id, lab.subset, lab.type, lab.probability, lab.confident])
    return path


def load_labels(path: Path) -> dict[str, QuestionLabel]:
    """Read a labels JSON written by :func:`save_labels`; errors name the file."""
    path = Path(path)
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
        rows = payload["labels"] if isinstance(payload, dict) else payload
        out = {}
        for row in rows:
            lab = QuestionLabel(
                question_id=str(row["question_id"]),
                subset=str(row.get("subset", "")),
                type=QuestionType.parse(str(row["type"])).value,
                probability=float(row.get("probability", 1.0)),
                confident=bool(row.get("confident", True)),
            )
            out[lab.question_id] = lab
        return out
    except FileNotFoundError:
        raise UserError(f"labels file not found: {path}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise UserError(f"labels file {path} is malformed: {exc}") from None


def type_of(labels: Mapping[str, QuestionLabel], question_id: str) -> str:
    lab = labels.get(question_id)
    return lab.type if lab else UNLABELLED


def distribution(labels: Mapping[str, QuestionLabel]) -> Counter[str]:
    return Counter(lab.type for lab in labels.values())


def type_counts(labels: Mapping[str, QuestionLabel]) -> dict[str, dict[str, int | None]]:
    """Our count of each type next to the paper's (None where the paper has no such type)."""
    ours = distribution(labels)
    return {
        t: {"ours": ours.get(t, 0), "paper": PAPER_TYPE_COUNTS.get(t)}
        for t in REPORT_TYPE_ORDER
        if ours.get(t) or t in PAPER_TYPE_COUNTS
    }


def distribution_table(labels: Mapping[str, QuestionLabel]) -> str:
    """Markdown table: our type counts next to the paper's."""
    ours = distribution(labels)
    total = sum(ours.values()) or 1
    paper_total = sum(PAPER_TYPE_COUNTS.values())
    unsure = sum(1 for lab in labels.values() if not lab.confident)
    lines = [
        "| type | ours | ours % | paper | paper % |",
        "|---|---:|---:|---:|---:|",
    ]
    for t in REPORT_TYPE_ORDER:
        n = ours.get(t, 0)
        p = PAPER_TYPE_COUNTS.get(t)
        if n == 0 and p is None:
            continue
        paper_cells = f"{p} | {100 * p / paper_total:.1f}" if p is not None else "- | -"
        lines.append(f"| {t} | {n} | {100 * n / total:.1f} | {paper_cells} |")
    lines.append(f"| total | {sum(ours.values())} | 100.0 | {paper_total} | 100.0 |")
    lines.append("")
    lines.append(f"{unsure} question(s) fell below the classifier's confidence threshold.")
    return "\n".join(lines)

"""Reading the NF-CATS labelled question files (``annotated_by,category,question``).

Questions may be quoted and span several lines, so the files are read with a
real CSV reader; a bad row is reported with its file and line number.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from typed_rag.config import DATA_ROOT
from typed_rag.errors import UserError
from typed_rag.types import LABELS, QuestionType

REQUIRED_COLUMNS = ("category", "question")
DATA_SOURCE = "https://github.com/Lurunchik/NF-CATS (folder nfcats/data/)"
# Where the set-up puts NF-CATS train.csv / valid.csv (the commands take other paths).
NFCATS_DIR = DATA_ROOT / "nf-cats"


@dataclass(frozen=True)
class LabelledQuestions:
    """Questions with their gold type, as parallel lists; ``labels`` are indices into LABELS."""

    questions: list[str]
    labels: list[int]
    path: Path

    def __len__(self) -> int:
        return len(self.questions)

    def counts(self) -> dict[str, int]:
        """Examples per type, in label order."""
        return {t.value: self.labels.count(i) for i, t in enumerate(LABELS)}


def read_nfcats_csv(path: Path) -> LabelledQuestions:
    """Parse one NF-CATS split; raises :class:`UserError` naming the file and line at fault."""
    if not path.is_file():
        raise UserError(
            f"{path}: NF-CATS data file not found; download train.csv and valid.csv from "
            f"{DATA_SOURCE} into {NFCATS_DIR}, or pass their paths (--train, --valid, --data)"
        )
    index = {t: i for i, t in enumerate(LABELS)}
    questions: list[str] = []
    labels: list[int] = []
    try:
        with path.open(newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise UserError(
                    f"{path}: missing column(s) {', '.join(missing)}; "
                    f"expected a header with {', '.join(REQUIRED_COLUMNS)}"
                )
            start = reader.line_num + 1
            for row in reader:
                question = (row.get("question") or "").strip()
                category = row.get("category") or ""
                if not question:
                    raise UserError(f"{path}:{start}: empty question")
                try:
                    label = QuestionType.parse(category)
                except ValueError as exc:
                    raise UserError(f"{path}:{start}: {exc}") from None
                questions.append(question)
                labels.append(index[label])
                start = reader.line_num + 1
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text ({exc.reason})") from None
    except csv.Error as exc:
        raise UserError(f"{path}: malformed CSV: {exc}") from None
    if not questions:
        raise UserError(f"{path}: no labelled questions")
    return LabelledQuestions(questions=questions, labels=labels, path=path)


def split_path(split: str, data_dir: Path = NFCATS_DIR) -> Path:
    """``<data_dir>/<split>.csv`` (by default the set-up's NF-CATS download)."""
    return data_dir / f"{split}.csv"

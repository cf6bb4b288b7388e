"""Judge-free answer checks against the source datasets' short answers.

Every Wiki-NFQA question comes from a factoid dataset (NQ, TriviaQA, SQuAD,
HotpotQA, 2WikiMQA, MuSiQue) whose short answer is kept as ``ground_truth``.
Whether a long answer contains that string (SQuAD normalisation) is a crude
but model-free signal: it cannot be fooled by fluent prose, so it is reported
beside every judge's verdicts.
"""

from __future__ import annotations

import ast
import re
import string
from collections.abc import Iterable, Sequence
from pathlib import Path

from eval.data.wikinfqa import load_wikinfqa

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize(text: str) -> str:
    """SQuAD-style normalisation: lower case, no punctuation or articles, single spaces."""
    text = text.lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def gold_aliases(gold: Iterable[str]) -> list[str]:
    """Normalised short answers; a stored Python list (``"['a', 'b']"``) counts as its items."""
    out: list[str] = []
    for value in gold:
        items: object = value
        if value.strip().startswith("["):
            try:
                items = ast.literal_eval(value)
            except (ValueError, SyntaxError):
                items = value
        for item in items if isinstance(items, list) else [items]:
            norm = normalize(str(item))
            if norm and norm not in out:
                out.append(norm)
    return out


def contains_gold(text: str, aliases: Sequence[str]) -> bool:
    """Whether any normalised alias occurs in the normalised ``text`` (as whole words)."""
    norm = f" {normalize(text)} "
    return any(f" {a} " in norm for a in aliases)


def gold_by_question(data_dir: str | Path) -> dict[str, list[str]]:
    """Question id -> normalised gold short answers of Wiki-NFQA at ``data_dir``
    (``UserError`` when the data is not there)."""
    return {r.question_id: gold_aliases(r.gold) for r in load_wikinfqa(data_dir).records}

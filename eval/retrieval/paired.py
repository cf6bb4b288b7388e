"""Paired answer-recall differences between two configs that ``index eval`` has measured.

Both configs answered the same questions, so the difference is taken question by question
(hit at k = first answer-bearing rank <= k) with a bootstrap over questions; ``won`` and
``lost`` count the questions where only one of them is a hit. Read from ``ranks.json``
rather than rerun, so a row of ``paired.json`` can be recomputed from what is committed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from eval.reports.linkage_metrics import paired_difference
from eval.retrieval.answer_recall import KS
from typed_rag.errors import UserError

N_BOOT = 2000
SEED = 42
ABOUT = {
    "what": "paired answer-recall@k differences, a - b, over the same questions, from ranks.json",
    "how": f"eval.reports.linkage_metrics.paired_difference(hit_a, hit_b, n_boot={N_BOOT}, "
    f"seed={SEED}), hit = rank <= k; `typed-rag index paired A B` writes a row",
}


def _hits(ranks: Sequence[int | None], k: int) -> list[float]:
    return [float(r is not None and r <= k) for r in ranks]


def paired_rows(
    ranks: Mapping[str, Sequence[int | None]],
    a: str,
    b: str,
    ks: Sequence[int] = KS,
    n_boot: int = N_BOOT,
    seed: int = SEED,
) -> list[dict[str, Any]]:
    """One row per k: ``a``'s recall minus ``b``'s, its 95% interval, questions won and lost."""
    for name in (a, b):
        if name not in ranks:
            known = ", ".join(sorted(ranks)) or "none"
            raise UserError(f"config {name!r} has no ranks to compare (measured: {known})")
    if len(ranks[a]) != len(ranks[b]):
        raise UserError(
            f"{a!r} and {b!r} were measured on different questions "
            f"({len(ranks[a])} against {len(ranks[b])}); run `index eval` on both in one run"
        )
    rows = []
    for k in ks:
        ha, hb = _hits(ranks[a], k), _hits(ranks[b], k)
        e = paired_difference(ha, hb, n_boot=n_boot, seed=seed)
        rows.append(
            {
                "a": a,
                "b": b,
                "k": k,
                "n": len(ha),
                "diff": round(e.mean, 4),
                "ci": [round(e.low, 4), round(e.high, 4)],
                "won": sum(x > y for x, y in zip(ha, hb, strict=True)),
                "lost": sum(x < y for x, y in zip(ha, hb, strict=True)),
            }
        )
    return rows


def load_ranks(out_dir: Path) -> dict[str, list[int | None]]:
    path = out_dir / "ranks.json"
    if not path.is_file():
        raise UserError(f"{path} not found: run `typed-rag index eval ... --out {out_dir}` first")
    try:
        ranks = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise UserError(
            f"{path} is not valid JSON ({exc}); run `typed-rag index eval` again"
        ) from exc
    if not isinstance(ranks, dict):
        raise UserError(f"{path} should map config names to per-question ranks")
    return ranks


def write_paired(out_dir: Path, rows: Sequence[dict[str, Any]]) -> Path:
    """Add ``rows`` to ``paired.json``, replacing earlier rows of the same (a, b, k)."""
    path = out_dir / "paired.json"
    doc = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    new = {(r["a"], r["b"], r["k"]) for r in rows}
    kept = [r for r in doc.get("rows", []) if (r["a"], r["b"], r["k"]) not in new]
    doc = {**ABOUT, "rows": kept + list(rows)}
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return path


def format_paired(rows: Sequence[dict[str, Any]]) -> str:
    lines = [f"{rows[0]['a']}  minus  {rows[0]['b']}  ({rows[0]['n']} questions)"]
    for r in rows:
        lo, hi = r["ci"]
        lines.append(
            f"  R@{r['k']:<4} {r['diff']:+.3f} [{lo:+.3f}, {hi:+.3f}]  "
            f"won {r['won']}, lost {r['lost']}"
        )
    return "\n".join(lines)

"""The ``method.own_knowledge=draft`` checks on REASON questions it was not found on.

Paired MRR, draft minus the default typed-rag, on (1) the development pool's 22 REASON
questions outside the 40 where the gain was found and (2) the reranked run's REASON
questions, each alone and pooled; a question-level bootstrap (``eval compare`` pairs whole
runs and cannot leave the 11 finding questions out). Writes
``results/method/own-knowledge/summary-reason-checks.json``.

    python -m benchmarks.own_knowledge_checks
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from eval.metrics import estimate
from eval.paired import row_scores
from typed_rag.store import read_jsonl

ROOT = Path("results/method/own-knowledge")


def mrr(run: Path, method: str = "typed-rag") -> dict[str, float]:
    """Per-question MRR of one method's REASON answers in a run directory."""
    out = {}
    for row in read_jsonl(run / "scores.jsonl"):
        value = row_scores(row)
        if row.get("method") == method and row.get("type") == "REASON" and value is not None:
            out[str(row["question_id"])] = value[0]
    return out


def paired(diffs: list[float], n_boot: int, seed: int) -> dict[str, object]:
    est = estimate(diffs, n_boot=n_boot, seed=seed)
    return {"n": est.count, "mrr_diff": round(est.mean, 4),
            "ci": [round(est.low, 4), round(est.high, 4)]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "summary-reason-checks.json")
    parser.add_argument("--boot", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    # The gain was found on the dev pool's first 40 typed questions: the first invocation
    # of dev-draft answered them, so they are its first 40 answer rows.
    finding = {str(r["question_id"]) for r in read_jsonl(ROOT / "dev-draft/answers.jsonl")[:40]}
    dev_draft, dev_base = mrr(ROOT / "dev-draft"), mrr(ROOT / "dev-base")
    head_draft = mrr(ROOT / "headline-draft")
    # The headline run's REASON answers before `eval splice` gave them the draft.
    head_base = mrr(Path("results/wiki-nfqa/reranked/spliced/1"))
    dev = [dev_draft[q] - dev_base[q] for q in dev_draft if q in dev_base and q not in finding]
    head = [head_draft[q] - head_base[q] for q in head_draft if q in head_base]
    summary = {
        "what": "method.own_knowledge=draft minus the default typed-rag on REASON questions "
        "it was not found on (paired MRR, eval.paired.row_scores, "
        f"{args.boot}-sample bootstrap, numpy seed {args.seed})",
        "dev_other_reason": paired(dev, args.boot, args.seed),
        "reranked_run_reason": paired(head, args.boot, args.seed),
        "pooled": paired(dev + head, args.boot, args.seed),
    }
    args.out.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()

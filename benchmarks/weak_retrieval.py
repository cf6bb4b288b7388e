"""Does typed-rag lose to the closed-book LLM where its retrieval is weak? (observational)

A fallback that lets the closed-book answer lead when the passages are weak only pays if
typed-rag's answers are worse than the LLM's there. This reads the headline run and, for each
typed-rag answer, two signals of how good its passages were: the best reranker score among
them, and, for an answer written from a closed-book draft (REASON, the factoid route), the
share of the draft's content words (not in the question) that the shown passages contain. Each route's answers are cut
into quartiles of a signal (tied values share a bin, so a signal with many zeros has fewer
bins), and typed-rag minus the LLM (expected reciprocal rank, as the report pairs them) is
given per bin with a bootstrap interval. Passage texts come from
the BM25 index's store (the run kept only ids). Writes ``<out>/summary.json``.

    python -m benchmarks.weak_retrieval --out results/method/weak-retrieval
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from cli.eval_papers import index_lookup
from eval.metrics import estimate
from eval.paired import row_scores
from typed_rag.config import load_settings
from typed_rag.store import read_jsonl
from typed_rag.subanswers import content_words


def draft_support(question: str, draft: str, passages: list[tuple[str, str]]) -> float:
    """Share of the draft's content words (those not in the question) the passages contain."""
    words = set(content_words(draft)) - set(content_words(question))
    shown = {w for t, x in passages for w in content_words(f"{t} {x}")}
    return len(words & shown) / len(words) if words else 0.0


def signals(run: Path) -> list[dict[str, Any]]:
    """One row per typed-rag answer: route, both signals (``draft_support`` None without a
    draft), typed-rag minus the LLM."""
    score = {
        (r["method"], r["question_id"]): v[0]
        for r in read_jsonl(run / "scores.jsonl")
        if (v := row_scores(r)) is not None
    }
    rows = [r for r in read_jsonl(run / "answers.jsonl") if r["method"] == "typed-rag"]
    ids = sorted({p["id"] for r in rows for p in r["result"]["passages"]})
    texts = index_lookup(load_settings())(ids)
    out = []
    for r in rows:
        qid, passages = r["question_id"], r["result"]["passages"]
        if ("llm", qid) not in score or ("typed-rag", qid) not in score:
            continue
        reranks = [p["rerank_score"] for p in passages if p.get("rerank_score") is not None]
        draft = (r["result"].get("plan") or {}).get("draft")
        out.append(
            {
                "question_id": qid,
                "route": r["route"],
                "subset": r["subset"],
                "best_rerank": max(reranks) if reranks else None,
                "draft_support": draft_support(
                    r["question"], draft, [texts[p["id"]] for p in passages]
                )
                if draft
                else None,
                "diff_llm": score["typed-rag", qid] - score["llm", qid],
            }
        )
    return out


def by_quartile(rows: list[dict[str, Any]], signal: str) -> list[dict[str, Any]]:
    """typed-rag minus the LLM in each quartile bin of ``signal`` (lowest first)."""
    rows = [r for r in rows if r[signal] is not None]
    if not rows:
        return []
    values = np.array([r[signal] for r in rows])
    cuts = np.quantile(values, [0.25, 0.5, 0.75])
    quartile = np.searchsorted(cuts, values, side="right")
    out = []
    for q in range(4):
        diffs = [r["diff_llm"] for r, k in zip(rows, quartile, strict=True) if k == q]
        if not diffs:
            continue
        e = estimate(diffs, n_boot=5000, seed=42)
        low = float(values[quartile == q].min())
        high = float(values[quartile == q].max())
        out.append(
            {
                "bin": q + 1,
                "range": [round(low, 3), round(high, 3)],
                "n": e.count,
                "diff_llm": [round(e.mean, 4), round(e.low, 4), round(e.high, 4)],
            }
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run", type=Path, default=Path("results/wiki-nfqa/reranked"))
    parser.add_argument("--out", type=Path, default=Path("results/method/weak-retrieval"))
    args = parser.parse_args()
    rows = signals(args.run)
    summary: dict[str, Any] = {"run": str(args.run), "n": len(rows), "routes": {}}
    for route in sorted({r["route"] for r in rows}):
        mine = [r for r in rows if r["route"] == route]
        summary["routes"][route] = {
            signal: by_quartile(mine, signal) for signal in ("best_rerank", "draft_support")
        }
        for signal, table in summary["routes"][route].items():
            if not table:
                continue
            print(f"{route} ({len(mine)}), {signal}:")
            for t in table:
                d = t["diff_llm"]
                print(
                    f"  bin {t['bin']} {t['range']} n={t['n']}: {d[0]:+.3f} [{d[1]:+.3f}, {d[2]:+.3f}]"
                )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()

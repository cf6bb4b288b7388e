"""``method.drop_echo`` measured on the answers it changes.

Every committed run judged marker-blind had its typed-rag answers replayed with
``--drop-echo`` (``benchmarks.trim_replay``) into ``results/method/drop-echo/runs/<run>``
and judged again there with the run's own command plus ``--set method.drop_echo=true``
(only the changed answers are judged). Over a whole run the difference is 0 for the answers
the cut leaves alone, so the measurement is the changed answers, each answer counted once
(the same answer stored in several runs is the first run's), pooled with a bootstrap
interval. Writes ``results/method/drop-echo/changed.json`` (each changed answer as cut, with
its scores before and after); the replay folders, copies of committed runs, are not kept.

    python -m benchmarks.drop_echo_pairs
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from eval.metrics import estimate
from eval.paired import row_scores
from typed_rag.store import read_jsonl

OUT = Path("results/method/drop-echo")
HEADLINE = "wiki-nfqa__reranked"
# The headline run now holds the cut answers; its rows as generated are the ones the splice
# that moved it to drop_echo set aside.
HEADLINE_BEFORE = Path("results/wiki-nfqa/reranked/spliced/3")


def _typed(path: Path) -> dict[str, dict[str, Any]]:
    return {r["question_id"]: r for r in read_jsonl(path) if r.get("method") == "typed-rag"}


def _source(slug: str) -> Path:
    return HEADLINE_BEFORE if slug == HEADLINE else Path("results", *slug.split("__"))


def changed_pairs() -> list[dict[str, Any]]:
    """One record per distinct answer the cut changed: run, route, length, scores before/after."""
    records, seen = [], set()
    runs = sorted((OUT / "runs").iterdir(), key=lambda p: (p.name != HEADLINE, p.name))
    for replay in runs:
        source = _source(replay.name)
        after, before = _typed(replay / "answers.jsonl"), _typed(source / "answers.jsonl")
        judged, judged_before = _typed(replay / "scores.jsonl"), _typed(source / "scores.jsonl")
        for qid, row in after.items():
            if not (row.get("result") or {}).get("unechoed") or qid not in judged:
                continue
            key = (qid, before[qid]["answer"])
            if key in seen:
                continue
            seen.add(key)
            (mrr_a, mpr_a), (mrr_b, mpr_b) = row_scores(judged[qid]), row_scores(judged_before[qid])
            records.append(
                {
                    "run": replay.name,
                    "question_id": qid,
                    "route": row["result"].get("type"),
                    "chars": [len(before[qid]["answer"]), len(row["answer"])],
                    "mrr": [round(mrr_b, 4), round(mrr_a, 4)],
                    "mpr": [round(mpr_b, 2), round(mpr_a, 2)],
                    "answer": row["answer"],
                }
            )
    return records


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean difference and 95% bootstrap interval (MRR, MPR), and how many got better/worse."""
    summary: dict[str, Any] = {"n_changed": len(records)}
    for key in ("mrr", "mpr"):
        e = estimate([r[key][1] - r[key][0] for r in records], n_boot=5000, seed=42)
        summary[f"{key}_diff"] = [round(e.mean, 4), round(e.low, 4), round(e.high, 4)]
    summary["better"] = sum(r["mrr"][1] > r["mrr"][0] for r in records)
    summary["worse"] = sum(r["mrr"][1] < r["mrr"][0] for r in records)
    return summary


def main() -> None:
    records = changed_pairs()
    summary = summarize(records)
    routes = sorted({r["route"] for r in records})
    summary["by_route"] = {
        route: summarize([r for r in records if r["route"] == route]) for route in routes
    }
    (OUT / "changed.json").write_text(json.dumps({**summary, "answers": records}, indent=1) + "\n")
    for r in records:
        print(f"{r['run']:40} {r['question_id']:32} {r['route']:10} {r['chars']} {r['mrr']}")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()

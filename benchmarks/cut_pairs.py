"""A finishing cut (``method.drop_echo``, ``method.drop_passage_copies``) measured on the
answers it changes.

Each committed run judged marker-blind has its typed-rag answers replayed with the cut
(``benchmarks.trim_replay``) into ``<folder>/runs/<run>`` (the run's path with ``/`` as
``__``) and judged again there with the run's own command plus the option (only the changed
answers are judged). Over a whole run the difference is 0 for the answers the cut leaves
alone, so the measurement is the changed answers (those whose trace has ``--flag``), each
counted once (the same answer stored in several runs is the first run's; the headline's
replay comes first), pooled with a bootstrap interval. Writes ``<folder>/changed.json``
(each changed answer as cut, with its scores before and after); the replay folders, copies
of committed runs, are not kept.

    python -m benchmarks.cut_pairs results/method/drop-echo --flag unechoed \\
        --before wiki-nfqa__reranked=results/wiki-nfqa/reranked/spliced/3
    python -m benchmarks.cut_pairs results/method/passage-copies --flag uncopied \\
        --before wiki-nfqa__reranked=results/wiki-nfqa/reranked/spliced/7
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from eval.metrics import estimate
from eval.paired import row_scores
from typed_rag.store import read_jsonl

HEADLINE = "wiki-nfqa__reranked"


def _typed(path: Path) -> dict[str, dict[str, Any]]:
    return {r["question_id"]: r for r in read_jsonl(path) if r.get("method") == "typed-rag"}


def changed_pairs(
    folder: Path, flag: str, before: dict[str, Path] | None = None
) -> list[dict[str, Any]]:
    """One record per distinct answer the cut changed: run, route, length, scores before and
    after. ``before`` names the run holding a replay's answers as generated, where that is
    not the committed run of the same path (a run since moved to the cut keeps its old rows
    under ``spliced/``)."""
    records, seen = [], set()
    runs = sorted((folder / "runs").iterdir(), key=lambda p: (p.name != HEADLINE, p.name))
    for replay in runs:
        source = (before or {}).get(replay.name) or Path("results", *replay.name.split("__"))
        after, original = _typed(replay / "answers.jsonl"), _typed(source / "answers.jsonl")
        judged, judged_before = _typed(replay / "scores.jsonl"), _typed(source / "scores.jsonl")
        for qid, row in after.items():
            if not (row.get("result") or {}).get(flag) or qid not in judged:
                continue
            key = (qid, original[qid]["answer"])
            if key in seen:
                continue
            seen.add(key)
            (mrr_a, mpr_a), (mrr_b, mpr_b) = row_scores(judged[qid]), row_scores(judged_before[qid])
            records.append(
                {
                    "run": replay.name,
                    "question_id": qid,
                    "route": row["result"].get("type"),
                    "chars": [len(original[qid]["answer"]), len(row["answer"])],
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
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path, help="holds runs/<run>, the judged replays")
    parser.add_argument("--flag", required=True, help="the trace flag the cut sets (unechoed)")
    parser.add_argument(
        "--before",
        action="append",
        default=[],
        metavar="RUN=DIR",
        help="the answers as generated for a replay whose run has since moved to the cut",
    )
    args = parser.parse_args()
    if bad := [item for item in args.before if "=" not in item]:
        parser.error(f"--before takes RUN=DIR, got {', '.join(bad)}")
    before = {run: Path(d) for run, d in (item.split("=", 1) for item in args.before)}
    records = changed_pairs(args.folder, args.flag, before)
    summary = summarize(records)
    routes = sorted({r["route"] for r in records})
    summary["by_route"] = {
        route: summarize([r for r in records if r["route"] == route]) for route in routes
    }
    out = args.folder / "changed.json"
    out.write_text(json.dumps({**summary, "answers": records}, indent=1) + "\n")
    for r in records:
        print(f"{r['run']:40} {r['question_id']:32} {r['route']:10} {r['chars']} {r['mrr']}")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()

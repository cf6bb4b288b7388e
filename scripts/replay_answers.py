"""Answer a fixed sample of Wiki-NFQA questions with forced types and write the answers.

Run it on two checkouts (before and after a change) with the same settings and compare the
files (``--compare BEFORE AFTER``): a refactoring that keeps behaviour gives identical text
for the fixed seed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

from eval.settings import load_lab_settings
from typed_rag.system import TypedRAG

TYPES = ("REASON", "INSTRUCTION", "DEBATE", "COMPARISON", "EXPERIENCE", "EVIDENCE-BASED", "FACTOID")


def sample(labels_path: Path, data_dir: Path, n: int) -> list[dict]:
    """The first confident questions of each type in labels order, round-robin to ``n``."""
    labels = json.loads(labels_path.read_text())["labels"]
    by_type: dict[str, list[dict]] = {t: [] for t in TYPES}
    for row in labels:
        if row["confident"] and row["type"] in by_type:
            by_type[row["type"]].append(row)
    questions = {}
    for path in sorted(data_dir.rglob("*.jsonl")):
        for line in path.open():
            rec = json.loads(line)
            qid = rec.get("question_id") or rec.get("id")
            questions[str(qid)] = rec.get("question_text") or rec.get("question")
    picked: list[dict] = []
    i = 0
    while len(picked) < n:
        for t in TYPES:
            if i < len(by_type[t]) and len(picked) < n:
                row = by_type[t][i]
                picked.append(
                    {"id": row["question_id"], "type": t, "question": questions[row["question_id"]]}
                )
        i += 1
    return picked


def compare(before: Path, after: Path) -> dict:
    """Answers and passages of the questions both files hold, compared exactly."""
    b, a = ({r["id"]: r for r in map(json.loads, p.open())} for p in (before, after))
    rows = [
        {
            "id": qid,
            "type": a[qid]["type"],
            "identical": a[qid]["answer"] == b[qid]["answer"],
            "same_passages": a[qid]["passages"] == b[qid]["passages"],
        }
        for qid in a
        if qid in b
    ]
    counts = {k: sum(r[k] for r in rows) for k in ("identical", "same_passages")}
    return {"n": len(rows), **counts, "rows": rows}


async def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    ap.add_argument("--out")
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--config")
    ap.add_argument("--set", action="append", default=[])
    args = ap.parse_args()
    if args.compare:
        result = compare(*args.compare)
        print(json.dumps({k: v for k, v in result.items() if k != "rows"}))
        if args.out:
            Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
        return 0
    if not args.out:
        ap.error("--out is required to answer")
    overrides = dict(s.split("=", 1) for s in args.set)
    settings = load_lab_settings(args.config, **overrides)  # with the eval section
    rows = sample(Path("results/wiki-nfqa/run/labels.json"), Path(settings.eval.data_dir), args.n)
    out = Path(args.out)
    done = {json.loads(line)["id"] for line in out.open()} if out.exists() else set()
    rag = TypedRAG.from_settings(settings)
    async with rag:
        for row in rows:
            if row["id"] in done:
                continue
            t0 = time.perf_counter()
            result = await rag.answer(
                row["question"], mode="typed-rag", force_type=row["type"], seed=42
            )
            rec = {
                **row,
                "answer": result.answer,
                "passages": [p.id for p in result.passages],
                "plan": result.plan,
                "seconds": round(time.perf_counter() - t0, 1),
            }
            with out.open("a") as f:
                f.write(json.dumps(rec) + "\n")
            print(row["id"], row["type"], rec["seconds"], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))

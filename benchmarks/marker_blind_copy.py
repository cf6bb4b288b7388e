"""A copy of an eval run that resumes under the marker-blind judge (``eval.judge_citations=strip``).

The judge reads each answer on its own, so a verdict stays valid where removing the ``[n]``
groups leaves the text unchanged; only the verdicts of answers that cite are dropped, and the
run's own command plus ``--set eval.judge_citations=strip`` judges them again. This is how
the headline moved to the marker-blind judge; it lets development runs follow it.

    python -m benchmarks.marker_blind_copy RUN --out COPY
"""

from __future__ import annotations

import argparse
import json
import shutil
from datetime import date
from pathlib import Path

from typed_rag.citations import without_citations


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def marker_blind_copy(run: Path, out: Path) -> dict[str, int]:
    """Copy ``run`` to ``out`` with the verdicts of citing answers removed; per-method counts."""
    if out.exists():
        raise SystemExit(f"{out} exists: choose a new folder")
    shutil.copytree(run, out)
    citing = {
        (row["method"], row["question_id"])
        for row in read_jsonl(out / "answers.jsonl")
        if without_citations(row["answer"]) != row["answer"]
    }
    scores = read_jsonl(out / "scores.jsonl")
    kept = [s for s in scores if (s["method"], s["question_id"]) not in citing]
    (out / "scores.jsonl").write_text("".join(json.dumps(s) + "\n" for s in kept))
    manifest = json.loads((out / "run.json").read_text())
    manifest["fingerprint"]["judge"]["citations"] = "strip"
    manifest["judge_citations_migration"] = {
        "date": date.today().isoformat(),
        "from": str(run),
        "note": "verdicts of answers that cite removed for judging again marker-blind; "
        "the others carried over (the judge reads the same text)",
    }
    (out / "run.json").write_text(json.dumps(manifest, indent=1) + "\n")
    counts: dict[str, int] = {}
    for method, _ in citing:
        counts[method] = counts.get(method, 0) + 1
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    counts = marker_blind_copy(args.run, args.out)
    print(json.dumps({"to_judge_again": counts}))


if __name__ == "__main__":
    main()

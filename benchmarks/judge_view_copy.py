"""A copy of an eval run that resumes under a judge that reads less of each answer.

``eval.judge_citations=strip`` (no ``[n]`` groups) and ``eval.judge_source_talk=strip`` (no
sentences vouching for the sources, :mod:`eval.judge_view`) change what the LINKAGE judge
reads. It reads each answer on its own, so a verdict stays valid where the new view reads
the same text as the run's; only the other verdicts are dropped, and the run's own command
plus the new ``--set`` judges them again. This is how the headline moved to each view; it
lets development runs follow it.

    python -m benchmarks.judge_view_copy RUN --strip citations,source-talk --out COPY
"""

from __future__ import annotations

import argparse
import json
import shutil
from collections.abc import Collection
from dataclasses import replace
from datetime import date
from pathlib import Path

from eval.judge_view import JudgeView
from typed_rag.store import read_jsonl

PARTS = ("citations", "source-talk")


def judge_view_copy(run: Path, out: Path, strip: Collection[str]) -> dict[str, int]:
    """Copy ``run`` to ``out`` with the verdicts the stricter view would not reproduce
    removed; per-method counts of those."""
    unknown = set(strip) - set(PARTS)
    if unknown:
        raise SystemExit(f"--strip: unknown {sorted(unknown)}; choose from {', '.join(PARTS)}")
    if out.exists():
        raise SystemExit(f"{out} exists: choose a new folder")
    shutil.copytree(run, out)
    manifest = json.loads((out / "run.json").read_text())
    judge = manifest["fingerprint"]["judge"]
    old = JudgeView.from_identity(judge)
    new = replace(
        old,
        strip_citations=old.strip_citations or "citations" in strip,
        strip_source_talk=old.strip_source_talk or "source-talk" in strip,
    )
    changed = {
        (row["method"], row["question_id"])
        for row in read_jsonl(out / "answers.jsonl")
        if old.read(row["answer"] or "") != new.read(row["answer"] or "")
    }
    kept = [
        s
        for s in read_jsonl(out / "scores.jsonl")
        if (s["method"], s["question_id"]) not in changed
    ]
    (out / "scores.jsonl").write_text("".join(json.dumps(s) + "\n" for s in kept))
    judge.update(new.identity())
    manifest.setdefault("judge_view_migrations", []).append(
        {
            "date": date.today().isoformat(),
            "from": str(run),
            "strip": sorted(strip),
            "note": "verdicts of answers the new view reads differently removed for judging "
            "again; the others carried over (the judge reads the same text)",
        }
    )
    (out / "run.json").write_text(json.dumps(manifest, indent=1) + "\n")
    counts: dict[str, int] = {}
    for method, _ in changed:
        counts[method] = counts.get(method, 0) + 1
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument(
        "--strip", required=True, help=f"comma list of what the judge stops reading: {PARTS}"
    )
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    strip = [p.strip() for p in args.strip.split(",") if p.strip()]
    print(json.dumps({"to_judge_again": judge_view_copy(args.run, args.out, strip)}))


if __name__ == "__main__":
    main()

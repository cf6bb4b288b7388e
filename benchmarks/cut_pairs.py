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

With ``--commands --set method.drop_repeats=true`` it prints instead the command that judges
each replay's changed answers: its run's last ``eval run`` (``run.json``'s invocations) with
the run's route as spliced (the fingerprint's), the option set, typed-rag only, ``--out`` the
replay and ``--stored-only``, so that only the stored answers' missing verdicts are asked.
"""

from __future__ import annotations

import argparse
import json
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eval.metrics import estimate
from eval.paired import row_scores
from typed_rag.store import read_jsonl

HEADLINE = "wiki-nfqa__reranked"


def _source(replay: Path, before: dict[str, Path] | None = None) -> Path:
    """The run a replay copied: ``results/<its name with __ as />``, or ``before``'s."""
    return (before or {}).get(replay.name) or Path("results", *replay.name.split("__"))


def _replace(argv: list[str], flag: str, value: str) -> list[str]:
    """``argv`` with ``flag``'s value replaced (or the pair added)."""
    if flag in argv:
        i = argv.index(flag)
        return [*argv[: i + 1], value, *argv[i + 2 :]]
    return [*argv, flag, value]


def judge_command(run: Path, replay: Path, sets: Sequence[str]) -> list[str]:
    """The command that judges ``replay``'s changed answers as ``run`` judged its own: the
    run's last ``eval run`` invocation, its route as its fingerprint says (a splice moves
    it without an invocation), ``sets`` added, typed-rag only, ``--out`` the replay, and
    ``--stored-only`` (a run answered in part elsewhere would otherwise answer the rest)."""
    manifest = json.loads((run / "run.json").read_text(encoding="utf-8"))
    argv = next(
        i["argv"]
        for i in reversed(manifest.get("invocations", []))
        if "eval" in i["argv"] and "run" in i["argv"]
    )
    at = argv.index("eval")
    route = manifest.get("fingerprint", {}).get("route")
    head = ["typed-rag"]
    for flag, value in zip(argv[1:at:2], argv[2:at:2], strict=True):
        if not (route and value.startswith("eval.route=")):
            head += [flag, value]
    if route:
        head += ["--set", f"eval.route={route}"]
    for item in sets:
        head += ["--set", item]
    tail = _replace(_replace(argv[at:], "--methods", "typed-rag"), "--out", str(replay))
    extra = [flag for flag in ("--stored-only", "--no-progress") if flag not in tail]
    return [*head, *tail, *extra]


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
        source = _source(replay, before)
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
        summary[f"{key}_diff"] = e.rounded()
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
    parser.add_argument(
        "--commands",
        action="store_true",
        help="print the command judging each replay with changed answers, then stop",
    )
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="with --commands"
    )
    args = parser.parse_args()
    if bad := [item for item in args.before if "=" not in item]:
        parser.error(f"--before takes RUN=DIR, got {', '.join(bad)}")
    before = {run: Path(d) for run, d in (item.split("=", 1) for item in args.before)}
    if args.commands:
        for replay in sorted((args.folder / "runs").iterdir()):
            rows = _typed(replay / "answers.jsonl").values()
            if any((row.get("result") or {}).get(args.flag) for row in rows):
                print(shlex.join(judge_command(_source(replay, before), replay, args.set)))
        return
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

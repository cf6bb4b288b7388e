"""Replay today's support check (typed_rag.pipelines.support) on a documents run's stored answers.

Each answer is rebuilt as it stood before the check (the answer call's text, finished again by
``finish`` with the run's method options: no generation), then checked by today's code with
the run's engine settings, and the rows are written as ``eval run`` writes them, so
``typed-rag eval grounding OUT ...`` measures them. A check changed without a method option
is thus measured paired on the same answers. Prints, per answer, the seconds the check took
and each flagged sentence's (P(supported), passage re-cited, removed); and how many unflagged
answers were rebuilt exactly (the replay's own check).

    python scripts/replay_support_check.py RUN_DIR OUT_DIR
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from typed_rag.config import load_settings
from typed_rag.engines import build_engine
from typed_rag.finishing.finish import finish
from typed_rag.method_settings import MethodOptions
from typed_rag.pipelines.support import drop_unsupported
from typed_rag.result import Result

# What the finishing steps and the check write: reset so the answer is finished afresh.
FINISHED_FLAGS = ("trimmed", "unechoed", "undrafted", "uncopied", "unscaffolded")
FINISHED_LISTS = (
    "scaffolding",
    "unverified",
    "citations",
    "invalid_citations",
    "added_citations",
    "dropped_citations",
)


def before_check(row: dict[str, Any], opts: MethodOptions) -> Result:
    """The row's answer as it stood before the support check."""
    stored = dict(row["result"])
    stored.update(dict.fromkeys(FINISHED_FLAGS, False))
    stored.update({k: [] for k in FINISHED_LISTS})
    stored["calls"] = [c for c in stored.get("calls", []) if c["step"] != "support"]
    stored["fallbacks"] = [f for f in stored.get("fallbacks", []) if "support check" not in f]
    result = Result.model_validate({"question": row["question"], "mode": "typed-rag", **stored})
    raw = [c.text for c in result.calls if c.step == "answer"]
    if raw:  # generated: finished again from the call's text
        result.answer = raw[-1]
        finish(result, opts, time.perf_counter())
    else:  # answered without generation ("the documents do not say")
        result.answer = row["answer"]
    return result


async def replay(run: Path, out: Path) -> None:
    opts = MethodOptions(**json.loads((run / "run.json").read_text())["fingerprint"]["method"])
    engine = build_engine(load_settings())
    await engine.start()
    out.mkdir(parents=True, exist_ok=True)
    for name in ("run.json", "labels.json", "labels.csv"):
        if (run / name).exists():
            shutil.copyfile(run / name, out / name)
    lines, rebuilt = [], []
    for line in (run / "answers.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        result = before_check(row, opts)
        if not any(u.get("kind") == "support" for u in row["result"].get("unverified", [])):
            rebuilt.append(result.answer == row["answer"])
        start = time.perf_counter()
        await drop_unsupported(result, lambda requests: engine.score_choices(list(requests)))
        flagged = [
            (u.p_supported, u.recited, u.removed) for u in result.unverified if u.kind == "support"
        ]
        print(row["question_id"], f"{time.perf_counter() - start:.1f}s", flagged, flush=True)
        new = {**row, "answer": result.answer, "result": result.model_dump(mode="json")}
        lines.append(json.dumps(new, ensure_ascii=False))
    (out / "answers.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    await engine.close()
    print(f"unflagged answers rebuilt exactly: {sum(rebuilt)} of {len(rebuilt)}")


if __name__ == "__main__":
    asyncio.run(replay(Path(sys.argv[1]), Path(sys.argv[2])))

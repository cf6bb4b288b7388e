"""``run.json``: what produced a run directory, so its numbers can be traced and resumed safely.

It names the generator and the scorer (scores from different scorers are not
comparable), the settings of both, the seeds and the git commit. Resuming
into a directory made with a different generator, scorer or LINKAGE setting
would mix incomparable results, so that is refused with the differences
listed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from eval.judging.linkage import REFERENCE_SEED, SCORER_MAX_TOKENS
from eval.judging.resample import JUDGE_TEMPERATURE
from eval.judging.view import JudgeView
from eval.retrieval.spec import settings_spec
from eval.settings import LabSettings
from typed_rag.config import REPO_ROOT, Settings
from typed_rag.errors import UserError
from typed_rag.method_settings import RETIRED_OPTIONS, MethodOptions

MANIFEST = "run.json"
# Fingerprint entries written only when they differ from the paper's setting.
PAPER_WHEN_ABSENT = ("method", "retrieval")


def git_commit(repo: Path = REPO_ROOT) -> dict[str, Any]:
    """HEAD commit and whether the tree had uncommitted changes (None outside git)."""
    try:
        head = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        return {"commit": head, "dirty": bool(dirty)}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}


def engine_identity(settings: Settings) -> dict[str, Any]:
    return {
        "backend": settings.engine.backend,
        "model": settings.engine.model,
        "base_url": settings.engine.base_url,
    }


def fingerprint(settings: Settings, scorer: Settings) -> dict[str, Any]:
    """The settings that must not change within one run directory: as declared, never as
    resolved on one machine (``auto`` stays ``auto``), so that stored runs stay comparable."""
    settings, scorer = settings.declared(), scorer.declared()
    return {
        "generator": engine_identity(settings),
        "generator_sampling": settings.sampling.model_dump(mode="json"),
        "top_k": settings.retrieval.top_k,
        "scorer": engine_identity(scorer),
        "scorer_sampling": scorer.sampling.model_dump(mode="json"),
        "reference_seed": REFERENCE_SEED,
        "paper_off_by_one": settings.eval.paper_off_by_one,
        "judge": judge_identity(settings),
        **method_identity(settings),
        **retrieval_identity(settings),
        # typed-rag routed by the classifier, not the recorded labels (absent: labels).
        **({"route": settings.eval.route} if settings.eval.route != "labels" else {}),
    }


def retrieval_identity(settings: Settings) -> dict[str, Any]:
    """The retrieval config when it is not the paper's plain BM25 (absent otherwise, so runs
    made before it was recorded, all plain BM25, still match, and a reranked run cannot
    resume into a BM25 one or the other way round)."""
    spec, kind = settings_spec(settings), settings.retrieval.kind
    return {} if (spec, kind) == ("bm25", "bm25") else {"retrieval": {"kind": kind, "spec": spec}}


def method_identity(settings: Settings) -> dict[str, Any]:
    """Typed-RAG's method options when they differ from the paper's (absent otherwise, so
    fingerprints of runs made before the options existed still match)."""
    options = settings.method.options().model_dump(mode="json")
    paper = MethodOptions().model_dump(mode="json")
    return {} if options == paper else {"method": options}


def judge_identity(settings: Settings) -> dict[str, Any]:
    """How verdicts are obtained: protocol, temperature (0 = deterministic), output budget."""
    return {
        "protocol": settings.eval.judge_protocol,
        "temperature": JUDGE_TEMPERATURE,
        "max_tokens": SCORER_MAX_TOKENS,
        **JudgeView.from_settings(settings.eval).identity(),
    }


def scorer_name(scorer: Settings) -> str:
    return f"{scorer.engine.backend}:{scorer.engine.model}"


def filled(value: Any, default: Any) -> Any:
    """``value`` with the keys it lacks taken from ``default``, recursively: a setting added
    to the project after a run was made stood at its default in that run."""
    if isinstance(value, dict) and isinstance(default, dict):
        return {**default, **{k: filled(v, default.get(k)) for k, v in value.items()}}
    return value


# Sampling budgets folded into another: a run whose budget equalled the one it joined
# answered as today's code does.
MERGED_BUDGETS = {"perspective_max_tokens": "sub_answer_max_tokens"}
SAMPLING_KEYS = ("generator_sampling", "scorer_sampling")


def without_retired(fp: dict[str, Any]) -> dict[str, Any]:
    """``fp`` without the method options that left the code, or the budgets merged into
    another, where it recorded them at the value today's code always has (a run made with
    another value differs, and says so)."""
    out = dict(fp)
    for key in SAMPLING_KEYS:
        budgets = fp.get(key)
        if isinstance(budgets, dict):
            out[key] = {
                k: v
                for k, v in budgets.items()
                if not (k in MERGED_BUDGETS and v == budgets.get(MERGED_BUDGETS[k], v))
            }
    method = fp.get("method")
    if isinstance(method, dict):
        out["method"] = {
            k: v
            for k, v in method.items()
            if not (k in RETIRED_OPTIONS and v == RETIRED_OPTIONS[k])
        }
    return out


def _diff(old: Any, new: Any, path: str = "") -> list[str]:
    """Differences between two fingerprints, one ``path: old -> new`` line per setting."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for key in sorted(set(old) | set(new)):
            out.extend(_diff(old.get(key), new.get(key), f"{path}.{key}" if path else key))
        return out
    return [] if old == new else [f"{path}: {old!r} -> {new!r}"]


def write_manifest(
    run_dir: Path,
    settings: Settings,
    scorer: Settings,
    *,
    methods: list[str],
    subsets: list[str],
    question_ids: list[str],
    options: dict[str, Any],
    data: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Create ``run.json`` or, when resuming, check it matches and record this invocation.

    ``data`` (``{path, sha256}``) names a graded file the questions came from instead of
    Wiki-NFQA: its hash joins the fingerprint (other references, other scores), and a
    Wiki-NFQA run, which has none, keeps its manifest and fingerprint as they were.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / MANIFEST
    fp = fingerprint(settings, scorer)
    if data is not None:
        fp["data"] = {"sha256": data["sha256"]}
    now = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    invocation = {
        "at": now,
        "argv": sys.argv,
        "methods": methods,
        "subsets": subsets,
        "questions": len(question_ids),
        "options": options,
        "git": git_commit(),
    }
    if path.exists():
        try:
            manifest = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise UserError(f"{path} is not valid JSON ({exc}); use a new --out") from None
        default = LabSettings()
        # A method or retrieval entry absent from an old fingerprint means the paper's
        # setting, not "added later, at its default": today's defaults differ from the paper's.
        added = {
            k: v for k, v in fingerprint(default, default).items() if k not in PAPER_WHEN_ABSENT
        }
        # A method option added after the run was made stood at the paper's value in it.
        added["method"] = MethodOptions().model_dump(mode="json")
        old_fp = without_retired(manifest.get("fingerprint", {}))
        diffs = _diff(filled(old_fp, added), filled(fp, added))
        judge_only = all(d.startswith(JUDGE_KEYS) for d in diffs)
        if diffs and judge_only and not _has_scores(run_dir):
            # Nothing judged yet: the answers do not depend on the judge, so it may change.
            manifest["fingerprint"] = fp
            manifest["scorer"] = {
                **engine_identity(scorer),
                "name": scorer_name(scorer),
                **judge_identity(settings),
            }
            manifest["scorer_settings"] = scorer.declared().model_dump(mode="json")
            diffs = []
        if diffs:
            raise UserError(
                f"run directory {run_dir} was made with different settings; use a new --out. "
                "Differences: " + "; ".join(diffs)
            )
        manifest.setdefault("invocations", []).append(invocation)
        manifest["methods"] = sorted(set(manifest.get("methods", [])) | set(methods))
        manifest["subsets"] = sorted(set(manifest.get("subsets", [])) | set(subsets))
    else:
        manifest = {
            "created": now,
            "generator": {**engine_identity(settings), "modes": methods},
            "scorer": {
                **engine_identity(scorer),
                "name": scorer_name(scorer),
                **judge_identity(settings),
            },
            "seed": settings.sampling.seed,
            "reference_seed": REFERENCE_SEED,
            "paper_off_by_one": settings.eval.paper_off_by_one,
            "methods": methods,
            "subsets": subsets,
            "git": invocation["git"],
            "fingerprint": fp,
            "settings": settings.declared().model_dump(mode="json"),
            "scorer_settings": scorer.declared().model_dump(mode="json"),
            "invocations": [invocation],
        }
    if data is not None:
        manifest["data"] = data
    manifest["question_ids"] = sorted(set(manifest.get("question_ids", [])) | set(question_ids))
    save_manifest(run_dir, manifest)
    return manifest


def save_manifest(run_dir: Path, manifest: dict[str, Any]) -> None:
    """Write ``run.json`` beside itself and rename, so an interrupted write leaves the old one."""
    path = Path(run_dir) / MANIFEST
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    tmp.replace(path)


# Fingerprint entries that only concern the judge (see write_manifest).
JUDGE_KEYS = ("scorer", "judge")


def _has_scores(run_dir: Path) -> bool:
    path = run_dir / "scores.jsonl"
    return path.exists() and path.stat().st_size > 0


def read_manifest(run_dir: Path) -> dict[str, Any]:
    path = Path(run_dir) / MANIFEST
    if not path.is_file():
        raise UserError(f"not a run directory (no {MANIFEST}): {run_dir}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise UserError(f"{path} is not valid JSON: {exc}") from None

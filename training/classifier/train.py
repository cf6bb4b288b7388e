"""Training and evaluating the type classifiers on NF-CATS (train / valid).

``train_classifier`` embeds both splits once, trains a small grid of heads
(hidden size x class-weight power) with a fixed seed, keeps the one with the
best valid macro-F1, fits a temperature on valid so that probabilities (and
``classifier.min_confidence``) mean something, and writes the artefact.
``train_finetuned_classifier`` does the same for the fine-tuned encoder
(the epoch is what is selected on valid).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from training.classifier.calibration import expected_calibration_error, fit_temperature, nll
from training.classifier.data import LabelledQuestions, read_nfcats_csv, split_path
from training.classifier.finetune import FineTuneConfig, fine_tune
from training.classifier.head import HeadConfig, TrainedHead, train_head
from training.classifier.lexical import train_lexical_part
from training.classifier.metrics import Report, classification_report, confidence_table
from typed_rag.classifier.base import BATCH_SIZE, TypeClassifier
from typed_rag.classifier.embedding_head import METRICS_NAME, HeadMeta, artefact_path, save_artefact
from typed_rag.classifier.finetune import FineTunedMeta
from typed_rag.classifier.finetune import artefact_path as finetuned_artefact_path
from typed_rag.classifier.finetune import save_artefact as save_finetuned
from typed_rag.classifier.head import logits_of, softmax
from typed_rag.classifier.lexical import LexicalPart
from typed_rag.config import Settings
from typed_rag.encoder import embed_questions, load_sentence_model
from typed_rag.models import ensure_model

log = logging.getLogger(__name__)

# Hidden size x class-weight power; other hyper-parameters are HeadConfig's defaults.
GRID: tuple[tuple[int, float], ...] = ((256, 0.0), (256, 0.5), (512, 0.0), (512, 0.5))
THRESHOLDS: tuple[float, ...] = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)

Echo = Callable[[str], None]


# The sentence model a classifier is trained on (``classifier train --embedder`` overrides):
# fine-tuned end to end it scores CV macro-F1 0.864; mpnet and e5 heads scored lower
# (docs/experiments.md, "Classifier").
EMBEDDER = "all-MiniLM-L6-v2"


def joins_lexical(kind: str) -> bool:
    """Whether a ``kind`` classifier is trained with the TF-IDF logistic regression beside it:
    where that was measured to help, the embedding head (CV 0.763 -> 0.828), not the
    fine-tuned encoder (0.860 with it against 0.864 without: one model fewer)."""
    return kind == "embedding-head"


@dataclass
class TrainSummary:
    artefact: Path
    embedder: str
    seed: int
    chosen: dict[str, Any]
    grid: list[dict[str, Any]]
    temperature: float
    valid: Report
    calibration: dict[str, float]
    confidence: list[dict[str, float]]
    timings_s: dict[str, float]


def _load_splits(
    train: Path | None, valid: Path | None, echo: Echo
) -> tuple[LabelledQuestions, LabelledQuestions]:
    """The train and valid splits (the given files, else the data folder's), echoed."""
    tr = read_nfcats_csv(train or split_path("train"))
    va = read_nfcats_csv(valid or split_path("valid"))
    echo(f"train: {len(tr)} questions from {tr.path}  {tr.counts()}")
    echo(f"valid: {len(va)} questions from {va.path}")
    return tr, va


def _calibration(
    logits: np.ndarray, y: np.ndarray, temperature: float, probs: np.ndarray
) -> dict[str, float]:
    """NLL and ECE on valid before (temperature 1) and after calibration."""
    return {
        "nll_before": nll(logits, y, 1.0),
        "nll_after": nll(logits, y, temperature),
        "ece_before": expected_calibration_error(softmax(logits), y),
        "ece_after": expected_calibration_error(probs, y),
    }


def _valid_metrics(report: Report) -> dict[str, Any]:
    """The valid-set numbers an artefact's metadata keeps."""
    return {"accuracy": report.accuracy, "macro_f1": report.macro_f1, "f1": report.f1_by_label()}


def train_classifier(
    settings: Settings,
    embedder: str | None = None,
    seed: int = 42,
    train_path: Path | None = None,
    valid_path: Path | None = None,
    grid: Sequence[tuple[int, float]] | None = None,
    base: HeadConfig | None = None,
    echo: Echo = print,
    lexical: bool | None = None,
) -> TrainSummary:
    """Train, select on valid, calibrate and save; returns what was measured.

    ``embedder`` defaults to :data:`EMBEDDER`. ``lexical`` (default: yes, see
    :func:`joins_lexical`) also trains a logistic regression
    on TF-IDF features learnt from train, calibrates it on valid, and combines it
    with the head (geometric mean, a third temperature fitted on valid).
    """
    embedder = embedder or EMBEDDER
    lexical = joins_lexical("embedding-head") if lexical is None else lexical
    grid = grid or GRID
    base = base or HeadConfig()
    timings: dict[str, float] = {}
    train, valid = _load_splits(train_path, valid_path, echo)

    t0 = time.perf_counter()
    encoder = load_sentence_model(settings, embedder, settings.classifier.device)
    timings["load_embedder"] = time.perf_counter() - t0
    x_tr, x_va = _embed_both(encoder, train, valid, BATCH_SIZE, echo, timings)
    y_tr, y_va = np.asarray(train.labels), np.asarray(valid.labels)

    t0 = time.perf_counter()
    runs: list[TrainedHead] = []
    rows: list[dict[str, Any]] = []
    for hidden, power in grid:
        cfg = replace(base, hidden=hidden, class_weight_power=power)
        run = train_head(x_tr, y_tr, x_va, y_va, cfg, seed=seed)
        runs.append(run)
        rows.append(
            {
                "hidden": hidden,
                "class_weight_power": power,
                "best_epoch": run.best_epoch,
                "valid_macro_f1": run.valid_macro_f1,
                "valid_accuracy": run.valid_accuracy,
            }
        )
        echo(
            f"  head hidden={hidden:<4d} class-weight power={power:<4}  best epoch "
            f"{run.best_epoch:>2d}  valid macro-F1 {run.valid_macro_f1:.4f}  "
            f"accuracy {run.valid_accuracy:.4f}"
        )
    timings["train_heads"] = time.perf_counter() - t0
    best = max(runs, key=lambda r: r.valid_macro_f1)  # max keeps the first of equals

    logits = logits_of(best.model, x_va)
    temperature = fit_temperature(logits, y_va)
    probs = softmax(logits, temperature)
    lex_part, temperature_for_nll = None, temperature
    if lexical:
        lex_part, logits = _train_lexical(train, valid, probs, echo, HEAD_LEXICAL, timings)
        temperature_for_nll = lex_part.ensemble_temperature
        probs = softmax(logits, temperature_for_nll)
    calibration = _calibration(logits, y_va, temperature_for_nll, probs)
    report = classification_report(y_va, probs.argmax(axis=1))
    confidence = confidence_table(probs, y_va, THRESHOLDS)
    chosen = asdict(best.config) | {"best_epoch": best.best_epoch}
    meta = HeadMeta(
        embedder=embedder,
        dim=int(x_tr.shape[1]),
        hidden=best.config.hidden,
        temperature=temperature,
        seed=seed,
        hyperparameters=chosen,
        metrics={
            "valid": _valid_metrics(report),
            "calibration": calibration,
            "train_file": str(train.path),
            "valid_file": str(valid.path),
        },
    )
    path = artefact_path(settings)
    save_artefact(path, best.model, meta, lex_part)
    summary = TrainSummary(
        artefact=path,
        embedder=embedder,
        seed=seed,
        chosen=chosen,
        grid=rows,
        temperature=temperature,
        valid=report,
        calibration=calibration,
        confidence=confidence,
        timings_s=timings,
    )
    (path.parent / METRICS_NAME).write_text(json.dumps(_summary_dict(summary), indent=2) + "\n")
    return summary


@dataclass(frozen=True)
class LexicalRecipe:
    """How the lexical part is trained beside a model (kept fixed per classifier kind, so a
    retrained artefact reproduces the measured recipe)."""

    feature_set: str = "base"
    max_terms: int = 4000
    power: float = 1.0  # class-weight power; 1.0 beat 0.5 on valid beside the head


# Beside the embedding head: base features (ensemble valid macro-F1 0.851 vs 0.829 at power 0.5).
HEAD_LEXICAL = LexicalRecipe()
# Beside the fine-tuned encoder: word trigrams and closing words too, 8,000 terms (README).
FINETUNED_LEXICAL = LexicalRecipe(feature_set="plus", max_terms=8000)


def _train_lexical(
    train: LabelledQuestions,
    valid: LabelledQuestions,
    other_probs: np.ndarray,
    echo: Echo,
    recipe: LexicalRecipe,
    timings: dict[str, float],
) -> tuple[LexicalPart, np.ndarray]:
    """The logistic regression on TF-IDF features, joined to the other model's calibrated
    valid probabilities; returns the part and the joined valid logits."""
    t0 = time.perf_counter()
    part, joined = train_lexical_part(
        train.questions, np.asarray(train.labels), valid.questions, np.asarray(valid.labels),
        other_probs, recipe.feature_set, recipe.max_terms, recipe.power,
    )  # fmt: skip
    echo(
        f"lexical model: {len(part.vocabulary.terms)} {recipe.feature_set} terms, "
        f"l2={part.info['l2']}, valid macro-F1 alone {part.info['valid_macro_f1_alone']:.4f}, "
        f"temperature {part.temperature:.3f}; ensemble temperature "
        f"{part.ensemble_temperature:.3f}"
    )
    timings["train_lexical"] = time.perf_counter() - t0
    y_va = np.asarray(valid.labels)
    part.info["valid_macro_f1_other_alone"] = classification_report(
        y_va, other_probs.argmax(axis=1)
    ).macro_f1
    return part, joined


def _embed_both(encoder, train, valid, batch_size: int, echo: Echo, timings: dict[str, float]):
    out = []
    for name, split in (("train", train), ("valid", valid)):
        t0 = time.perf_counter()
        echo(f"embedding {name} ({len(split)} questions) ...")
        out.append(embed_questions(encoder, split.questions, batch_size=batch_size))
        timings[f"embed_{name}"] = time.perf_counter() - t0
        echo(f"  {timings[f'embed_{name}']:.1f} s")
    return out[0], out[1]


def _summary_dict(s: TrainSummary) -> dict[str, Any]:
    return {
        "artefact": str(s.artefact),
        "embedder": s.embedder,
        "seed": s.seed,
        "chosen": s.chosen,
        "grid": s.grid,
        "temperature": s.temperature,
        "calibration": s.calibration,
        "valid": s.valid.to_dict(),
        "confidence": s.confidence,
        "timings_s": s.timings_s,
    }


@dataclass
class EvalResult:
    report: Report
    confidence: list[dict[str, float]]
    below_min_confidence: dict[str, float]
    seconds: float


def evaluate(
    classifier: TypeClassifier,
    data: LabelledQuestions,
    min_confidence: float,
    batch_size: int = 256,
) -> EvalResult:
    """Score any :class:`TypeClassifier` on labelled questions (batched)."""
    t0 = time.perf_counter()
    probs: list[list[float]] = []
    for start in range(0, len(data), batch_size):
        probs.extend(classifier.predict_proba(data.questions[start : start + batch_size]))
    seconds = time.perf_counter() - t0
    p = np.asarray(probs, dtype=float)
    y = np.asarray(data.labels)
    report = classification_report(y, p.argmax(axis=1))
    thresholds = sorted({*THRESHOLDS, min_confidence})
    table = confidence_table(p, y, thresholds)
    at = next(r for r in table if r["threshold"] == min_confidence)
    return EvalResult(report, table, at, seconds)


FINETUNED_METRICS_NAME = "metrics-finetuned.json"


def train_finetuned_classifier(
    settings: Settings,
    base: str | None = None,
    seed: int = 42,
    train_path: Path | None = None,
    valid_path: Path | None = None,
    config: FineTuneConfig | None = None,
    echo: Echo = print,
    lexical: bool | None = None,
) -> TrainSummary:
    """Fine-tune ``base`` (default :data:`EMBEDDER`) on train, keep the best valid epoch,
    fit a temperature on valid and save the artefact; returns what was measured.

    ``lexical`` (default: no, see :func:`joins_lexical`) joins a logistic regression on TF-IDF
    features to the encoder, as :func:`train_classifier` does to the head.
    """
    base = base or EMBEDDER
    config = config or FineTuneConfig()
    lexical = joins_lexical("finetuned") if lexical is None else lexical
    train, valid = _load_splits(train_path, valid_path, echo)
    echo(f"fine-tuning {base}: {config.epochs} epochs, lr {config.lr}, batch {config.batch_size}")
    folder = ensure_model(settings, base)
    res, _, enc_config = fine_tune(
        folder, train.questions, train.labels, valid.questions, valid.labels, config, seed, echo
    )
    y_va = np.asarray(valid.labels)
    logits = res.valid_logits
    temperature = fit_temperature(logits, y_va)
    probs = softmax(logits, temperature)
    timings = {"fine_tune": res.seconds}
    lex_part, temperature_for_nll = None, temperature
    if lexical:
        lex_part, logits = _train_lexical(train, valid, probs, echo, FINETUNED_LEXICAL, timings)
        temperature_for_nll = lex_part.ensemble_temperature
        probs = softmax(logits, temperature_for_nll)
    calibration = _calibration(logits, y_va, temperature_for_nll, probs)
    report = classification_report(y_va, probs.argmax(axis=1))
    confidence = confidence_table(probs, y_va, THRESHOLDS)
    chosen = asdict(config) | {"best_epoch": res.best_epoch}
    meta = FineTunedMeta(
        base=base,
        encoder_config=enc_config,
        temperature=temperature,
        max_length=config.max_length,
        seed=seed,
        hyperparameters=chosen,
        metrics={
            "valid": _valid_metrics(report),
            "calibration": calibration,
            "history": res.history,
            "train_seconds": res.seconds,
            "train_file": str(train.path),
            "valid_file": str(valid.path),
        },
    )
    path = finetuned_artefact_path(settings)
    save_finetuned(path, res.model, meta, lex_part)
    summary = TrainSummary(
        artefact=path,
        embedder=base,
        seed=seed,
        chosen=chosen,
        grid=res.history,
        temperature=temperature,
        valid=report,
        calibration=calibration,
        confidence=confidence,
        timings_s=timings,
    )
    out = path.parent / FINETUNED_METRICS_NAME
    out.write_text(json.dumps(_summary_dict(summary), indent=2) + "\n")
    return summary

"""``typed-rag classifier train|eval``: train the question-type classifier on NF-CATS and
report its accuracy (:mod:`training.classifier`); ``predict`` is the runtime's."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from training.classifier.data import read_nfcats_csv, split_path
from training.classifier.metrics import format_confidence_table, format_report
from typed_rag.classifier import build_classifier
from typed_rag.classifier.base import BATCH_SIZE
from typed_rag.config import Settings
from typed_rag.errors import UserError


def register(inner: argparse._SubParsersAction) -> None:
    """Add ``train`` and ``eval`` to the runtime's ``classifier`` group."""
    train = inner.add_parser(
        "train",
        help="train the classifier (classifier.kind) on NF-CATS train, select and calibrate on valid",
    )
    train.add_argument(
        "--kind",
        choices=TRAINABLE,
        help="what to train (default: classifier.kind; the nfcats checkpoint is not trained here)",
    )
    train.add_argument(
        "--embedder",
        help="sentence model name or folder: the head's embedder, or the encoder to fine-tune "
        "(default: all-MiniLM-L6-v2)",
    )
    train.add_argument("--seed", type=int, default=42, help="seed of every random step (42)")
    train.add_argument("--train", type=Path, help="train CSV (default: <data_dir>/train.csv)")
    train.add_argument("--valid", type=Path, help="valid CSV (default: <data_dir>/valid.csv)")
    train.add_argument(
        "--if-missing",
        action="store_true",
        help="do nothing if a valid artefact for the same embedder and seed exists (set-up uses it)",
    )
    train.add_argument(
        "--quick",
        action="store_true",
        help="embedding-head: one head (hidden 256, class-weight power 0.5, the grid's usual "
        "choice) instead of the grid of four; the set-up's first classifier",
    )
    train.set_defaults(func=_train)

    ev = inner.add_parser("eval", help="accuracy, macro-F1, per-class P/R/F1 and confusion")
    ev.add_argument("--data", type=Path, help="labelled CSV (default: <data_dir>/valid.csv)")
    ev.add_argument("--json", type=Path, help="also write the report as JSON here")
    ev.set_defaults(func=_eval)


TRAINABLE = ("embedding-head", "finetuned")
QUICK_GRID = ((256, 0.5),)  # the full grid's choice on valid (its metrics.json "chosen")


def _kind(args: argparse.Namespace, settings: Settings) -> str:
    kind = args.kind or settings.classifier.kind
    if kind not in TRAINABLE:
        raise UserError(
            f"classifier.kind={kind!r} is a published checkpoint, not trained here; "
            f"use --kind {' or --kind '.join(TRAINABLE)}"
        )
    return kind


def _train(args: argparse.Namespace, settings: Settings) -> int:
    from training.classifier import train as training  # heavy: torch

    kind = _kind(args, settings)
    if args.if_missing and (existing := _up_to_date(settings, args, kind)) is not None:
        print(f"classifier up to date: {existing}")
        return 0
    common = {
        "seed": args.seed,
        "train_path": args.train,
        "valid_path": args.valid,
        "echo": lambda line: print(line, flush=True),
    }
    if kind == "finetuned":
        s = training.train_finetuned_classifier(settings, base=args.embedder, **common)
        print(
            f"\nfine-tuned {s.embedder}: best epoch {s.chosen['best_epoch']} of "
            f"{s.chosen['epochs']} ({s.timings_s['fine_tune']:.0f} s)"
        )
    else:
        grid = QUICK_GRID if args.quick else None
        s = training.train_classifier(settings, embedder=args.embedder, grid=grid, **common)
        print(
            f"\nchosen head: hidden={s.chosen['hidden']} class-weight power="
            f"{s.chosen['class_weight_power']} epoch={s.chosen['best_epoch']}"
        )
    print(
        f"temperature {s.temperature:.3f}: valid NLL {s.calibration['nll_before']:.4f} -> "
        f"{s.calibration['nll_after']:.4f}, ECE {s.calibration['ece_before']:.4f} -> "
        f"{s.calibration['ece_after']:.4f}"
    )
    print("\nvalid set report\n" + format_report(s.valid))
    print("\ntop-1 probability thresholds (calibrated)\n" + format_confidence_table(s.confidence))
    print(f"\nsaved {s.artefact}")
    return 0


def _up_to_date(settings: Settings, args: argparse.Namespace, kind: str) -> Path | None:
    """The existing artefact if it loads and was trained with the requested encoder, seed and
    lexical part (or none)."""
    from training.classifier.train import EMBEDDER, joins_lexical  # heavy: torch
    from typed_rag.classifier import embedding_head, finetune

    wanted = args.embedder or EMBEDDER
    if args.train is not None or args.valid is not None:
        return None
    try:
        if kind == "finetuned":
            path = finetune.artefact_path(settings)
            if not path.is_file():
                return None
            fmeta = finetune.read_meta(path)
            trained_on, seed, lexical = fmeta.base, fmeta.seed, fmeta.lexical
        else:
            path = embedding_head.artefact_path(settings)
            if not path.is_file():
                return None
            _, meta = embedding_head.load_artefact(path)
            trained_on, seed, lexical = meta.embedder, meta.seed, meta.lexical
    except UserError:
        return None
    same_features = (lexical is not None) == joins_lexical(kind)
    return path if trained_on == wanted and seed == args.seed and same_features else None


def _eval(args: argparse.Namespace, settings: Settings) -> int:
    from training.classifier.train import evaluate  # heavy: torch

    data = read_nfcats_csv(args.data or split_path("valid"))
    classifier = build_classifier(settings)
    threshold = settings.classifier.min_confidence
    res = evaluate(classifier, data, threshold, batch_size=BATCH_SIZE * 4)
    print(f"{classifier.name} on {data.path} ({res.seconds:.1f} s)")
    print(format_report(res.report))
    print("\ntop-1 probability thresholds\n" + format_confidence_table(res.confidence))
    b = res.below_min_confidence
    acc = "n/a" if b["below"] == 0 else f"{b['below_accuracy']:.3f}"
    print(
        f"\nmin_confidence={threshold}: {int(b['below'])} of {res.report.n} questions below it "
        f"(accuracy there {acc}) would go to plain RAG"
    )
    if args.json:
        payload = {
            "classifier": classifier.name,
            "data": str(data.path),
            "report": res.report.to_dict(),
            "confidence": res.confidence,
            "min_confidence": threshold,
            "seconds": res.seconds,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    return 0

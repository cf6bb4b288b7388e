"""Question-type classifier recipes side by side: valid scores, k-fold CV with CIs, speed.

Recipes (each is what ``typed-rag classifier train`` does for that kind: fit on
one part, select and calibrate on another):

- ``head``: frozen all-MiniLM-L6-v2 embedding + MLP head, today's grid (the "before");
- ``head-w1``: the same with class-weight powers 0.5 and 1.0 (stronger rare-type weighting);
- ``finetuned``: all-MiniLM-L6-v2 fine-tuned end to end, class-weighted loss;
- ``ensemble``: geometric mean of ``finetuned`` and ``head`` probabilities, re-calibrated;
- ``soup``: ``--soup N`` fine-tunes from one start, weights averaged (one model to serve);
- ``seeds``: the same N fine-tunes' probabilities averaged instead (an N-model ensemble);
- ``soup-first``: the first of them alone (``finetuned``, from the same runs).

Valid scores: fit on train.csv, select and calibrate on valid.csv (optimistic).
CV: k folds over train + valid (see training/classifier/crossval.py).
Per-fold held-out probabilities are cached in ``--work`` so an interrupted
run resumes. Writes ``<out>/summary.json``.

    python benchmarks/classifier_bench.py --recipes head head-w1 finetuned ensemble
    python benchmarks/classifier_bench.py --device cuda --cv-only --recipes soup-first soup seeds

``--device cuda`` fine-tunes on a GPU (the recipes are the same; minutes instead of hours
for a soup's CV). Each recipe's pooled CV predictions are written with it, so runs made on
different machines or days can be paired on the same questions.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from training.classifier.calibration import expected_calibration_error, fit_temperature
from training.classifier.crossval import cross_validate, paired_difference
from training.classifier.data import read_nfcats_csv, split_path
from training.classifier.finetune import FineTuneConfig, fine_tune
from training.classifier.head import HeadConfig, train_head
from training.classifier.lexical import fit_vocabulary, train_linear
from training.classifier.metrics import classification_report
from training.classifier.timing import speed
from training.classifier.train import GRID
from typed_rag.classifier.finetune import logits_of
from typed_rag.classifier.head import ensemble_logits, softmax
from typed_rag.classifier.head import logits_of as head_logits
from typed_rag.classifier.lexical import linear_logits
from typed_rag.config import load_settings
from typed_rag.encoder import embed_questions, load_sentence_model
from typed_rag.models import ensure_model
from typed_rag.types import LABELS

Probs = tuple[np.ndarray, np.ndarray]  # (select probabilities, test probabilities)


def _key(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:16]


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.settings = load_settings()
        tr, va = read_nfcats_csv(split_path("train")), read_nfcats_csv(split_path("valid"))
        self.questions = tr.questions + va.questions
        self.labels = np.asarray(tr.labels + va.labels)
        self.train_idx = np.arange(len(tr))
        self.valid_idx = np.arange(len(tr), len(self.labels))
        self.work: Path = args.work
        self.work.mkdir(parents=True, exist_ok=True)
        self.log = (self.work / "bench.log").open("a")
        self._emb: dict[str, np.ndarray] = {}
        self.cv_mode = False

    def echo(self, line: str) -> None:
        stamp = time.strftime("%H:%M:%S")
        print(f"{stamp} {line}", flush=True)
        self.log.write(f"{stamp} {line}\n")
        self.log.flush()

    # ---- cached inputs ----------------------------------------------------------

    def embeddings(self, name: str) -> np.ndarray:
        if name in self._emb:
            return self._emb[name]
        path = self.work / f"emb-{name}.npy"
        if path.is_file():
            x = np.load(path)
        else:
            t0 = time.perf_counter()
            model = load_sentence_model(self.settings, name)
            x = embed_questions(model, self.questions, batch_size=64)
            np.save(path, x)
            self.echo(
                f"embedded {len(x)} questions with {name} in {time.perf_counter() - t0:.0f} s"
            )
        self._emb[name] = x
        return x

    def cached(self, name: str, fit: np.ndarray, select: np.ndarray, test: np.ndarray,
               run: Callable[[], Probs]) -> Probs:  # fmt: skip
        path = self.work / f"probs-{name}-{_key(fit.tolist(), select.tolist(), test.tolist())}.npz"
        if path.is_file():
            z = np.load(path)
            return z["select"], z["test"]
        sel, tst = run()
        np.savez(path, select=sel, test=tst)
        return sel, tst

    # ---- recipes ---------------------------------------------------------------

    def mlp(self, tag: str, fit: np.ndarray, select: np.ndarray, test: np.ndarray,
            grid: tuple[tuple[int, float], ...], inputs: str, patience: int | None) -> Probs:  # fmt: skip
        """The MLP head on ``inputs``: ``emb`` (MiniLM), ``mpnet``, ``lex`` (TF-IDF learnt from
        ``fit``) or ``emb+lex``; the grid's best on ``select``, calibrated there."""
        parts = []
        if inputs in ("emb", "emb+lex"):
            parts.append(self.embeddings("all-MiniLM-L6-v2"))
        if inputs == "mpnet":
            parts.append(self.embeddings("all-mpnet-base-v2"))
        if inputs in ("lex", "emb+lex"):
            parts.append(fit_vocabulary([self.questions[i] for i in fit]).transform(self.questions))
        x, y = np.hstack(parts), self.labels
        runs = [
            train_head(x[fit], y[fit], x[select], y[select],
                       replace(HeadConfig(), hidden=h, class_weight_power=p, patience=patience),
                       seed=self.args.seed)
            for h, p in grid
        ]  # fmt: skip
        best = max(runs, key=lambda r: r.valid_macro_f1)
        z_sel = head_logits(best.model, x[select])
        t = fit_temperature(z_sel, y[select])
        chosen = (best.config.hidden, best.config.class_weight_power)
        self.echo(f"    {tag} ({x.shape[1]}-d): hidden={chosen[0]} power={chosen[1]} "
                  f"epoch={best.best_epoch} T={t:.2f}")  # fmt: skip
        if len(grid) > 1:
            (self.work / f"chosen-{tag}-{self.args.seed}.json").write_text(json.dumps(chosen))
        return softmax(z_sel, t), softmax(head_logits(best.model, x[test]), t)

    def lexlin(self, fit: np.ndarray, select: np.ndarray, test: np.ndarray, power: float) -> Probs:
        """Logistic regression on TF-IDF features learnt from ``fit``; L2 chosen on ``select``."""
        x = fit_vocabulary([self.questions[i] for i in fit]).transform(self.questions)
        y = self.labels
        model, l2 = train_linear(x[fit], y[fit], x[select], y[select], power=power)
        z_sel = linear_logits(model, x[select])
        t = fit_temperature(z_sel, y[select])
        self.echo(f"    lexical linear: l2={l2} power={power} T={t:.2f}")
        return softmax(z_sel, t), softmax(linear_logits(model, x[test]), t)

    def mlp_recipe(self, tag: str, grid: tuple[tuple[int, float], ...], inputs: str,
                   patience: int | None) -> Callable[[np.ndarray, np.ndarray, np.ndarray], Probs]:  # fmt: skip
        """Valid mode: the whole grid. CV mode: the configuration chosen on valid, patience 10."""

        def run(f: np.ndarray, s: np.ndarray, t: np.ndarray) -> Probs:
            chosen_file = self.work / f"chosen-{tag}-{self.args.seed}.json"
            if self.cv_mode and chosen_file.is_file():
                h, p = json.loads(chosen_file.read_text())
                name, g, pat = f"{tag}-fixed-{h}-{p}-{self.args.seed}", ((int(h), float(p)),), 10
            else:
                name, g, pat = f"{tag}-{self.args.seed}", grid, patience
            return self.cached(name, f, s, t, lambda: self.mlp(tag, f, s, t, g, inputs, pat))

        return run

    def finetuned(self, fit: np.ndarray, select: np.ndarray, test: np.ndarray) -> Probs:
        """The fine-tuned recipe."""
        cfg = self.ft_config()
        folder = ensure_model(self.settings, self.args.base)
        q, y = self.questions, self.labels
        fit_q, fit_y = [q[i] for i in fit], [int(y[i]) for i in fit]
        res, tok, _ = fine_tune(folder, fit_q, np.asarray(fit_y), [q[i] for i in select],
                                y[select], cfg, seed=self.args.seed, echo=self.echo)  # fmt: skip
        t = fit_temperature(res.valid_logits, y[select])
        z_test = logits_of(res.model, tok, [q[i] for i in test], cfg.max_length, 128, cfg.device)
        self.echo(f"    fine-tuned: best epoch {res.best_epoch}, T={t:.2f}, {res.seconds:.0f} s "
                  f"wall, {res.cpu_seconds:.0f} s CPU, load {os.getloadavg()[0]:.1f}")  # fmt: skip
        self.ft_seconds.append({"wall": res.seconds, "cpu": res.cpu_seconds,
                                "load_avg_1min_end": os.getloadavg()[0], "history": res.history})  # fmt: skip
        return softmax(res.valid_logits, t), softmax(z_test, t)

    def ft_config(self, soup: int = 1) -> FineTuneConfig:
        a = self.args
        return FineTuneConfig(lr=a.lr, epochs=a.epochs, class_weight_power=a.power,
                              batch_size=a.batch_size, train_layers=a.train_layers,
                              soup=soup, device=a.device)  # fmt: skip

    def souped(self, fit: np.ndarray, select: np.ndarray, test: np.ndarray) -> dict[str, Probs]:
        """``--soup N`` fine-tunes of one start: their averaged weights (``soup``), their
        averaged probabilities (``seeds``) and the first alone (``first``, the ``finetuned``
        recipe), each calibrated on ``select``; cached together."""
        cfg = self.ft_config(self.args.soup)
        path = self.work / (
            f"probs-soup-{_key(asdict(cfg), self.args.seed, self.args.base)}-"
            f"{_key(fit.tolist(), select.tolist(), test.tolist())}.npz"
        )
        if path.is_file():
            z = np.load(path)
            return {k: (z[f"{k}_select"], z[f"{k}_test"]) for k in ("soup", "seeds", "first")}
        folder = ensure_model(self.settings, self.args.base)
        q, y = self.questions, self.labels
        q_sel, q_test = [q[i] for i in select], [q[i] for i in test]
        res, tok, _ = fine_tune(folder, [q[i] for i in fit], y[fit], q_sel, y[select], cfg,
                                seed=self.args.seed, echo=self.echo)  # fmt: skip
        t = fit_temperature(res.valid_logits, y[select])
        out = {"soup": (softmax(res.valid_logits, t),
                        softmax(logits_of(res.model, tok, q_test, cfg.max_length, 128, cfg.device), t))}  # fmt: skip
        members = []
        for state in res.members:
            res.model.load_state_dict(state)
            z_sel = logits_of(res.model, tok, q_sel, cfg.max_length, 128, cfg.device)
            t_m = fit_temperature(z_sel, y[select])
            z_tst = logits_of(res.model, tok, q_test, cfg.max_length, 128, cfg.device)
            members.append((softmax(z_sel, t_m), softmax(z_tst, t_m)))
        out["seeds"] = self.ensemble(members, y[select])
        out["first"] = members[0]  # what ``finetuned`` trains (same start, seed and data order)
        self.echo(f"    soup of {cfg.soup}: {res.seconds:.0f} s wall, {res.cpu_seconds:.0f} s CPU")
        self.ft_seconds.append(
            {"wall": res.seconds, "cpu": res.cpu_seconds, "history": res.history}
        )
        np.savez(path, **{f"{k}_{part}": v[i] for k, v in out.items()
                          for i, part in enumerate(("select", "test"))})  # fmt: skip
        return out

    def ensemble(self, parts: list[Probs], select_y: np.ndarray) -> Probs:
        log_sel = ensemble_logits([p[0] for p in parts])
        log_tst = ensemble_logits([p[1] for p in parts])
        t = fit_temperature(log_sel, select_y)
        return softmax(log_sel, t), softmax(log_tst, t)

    def recipe(self, name: str) -> Callable[[np.ndarray, np.ndarray, np.ndarray], Probs]:
        ft_tag = f"finetuned-{_key(asdict(self.ft_config()), self.args.seed, self.args.base)}"
        grid_w1 = tuple((h, p) for h in (256, 512) for p in (0.5, 1.0))
        grid_lex = tuple((256, p) for p in (0.5, 1.0))
        table: dict[str, Callable[[np.ndarray, np.ndarray, np.ndarray], Probs]] = {
            "head": self.mlp_recipe("head", GRID, "emb", None),
            "head-w1": self.mlp_recipe("headw1", grid_w1, "emb", None),
            "head-mpnet": self.mlp_recipe("headmpnet", GRID, "mpnet", None),
            "lex": self.mlp_recipe("lex", grid_lex, "lex", 10),
            "head+lex": self.mlp_recipe("headlex", grid_lex, "emb+lex", 10),
            "lexlin": lambda f, s, t: self.cached(
                f"lexlin-{self.args.seed}", f, s, t, lambda: self.lexlin(f, s, t, 0.5)),
            "lexlin-w1": lambda f, s, t: self.cached(
                f"lexlinw1-{self.args.seed}", f, s, t, lambda: self.lexlin(f, s, t, 1.0)),
            "ens-head-lexlin": lambda f, s, t: self.ensemble(
                [table["head"](f, s, t), table["lexlin"](f, s, t)], self.labels[s]),
            "ens-head-lexlin-w1": lambda f, s, t: self.ensemble(
                [table["head"](f, s, t), table["lexlin-w1"](f, s, t)], self.labels[s]),
            "ens-head-lex": lambda f, s, t: self.ensemble(
                [table["head"](f, s, t), table["lex"](f, s, t)], self.labels[s]),
            "ens-headlex-head": lambda f, s, t: self.ensemble(
                [table["head+lex"](f, s, t), table["head"](f, s, t)], self.labels[s]),
            "finetuned": lambda f, s, t: self.cached(
                ft_tag, f, s, t, lambda: self.finetuned(f, s, t)),
            "ensemble": lambda f, s, t: self.ensemble(
                [table["finetuned"](f, s, t), table["head"](f, s, t)], self.labels[s]),
            "ensemble-w1": lambda f, s, t: self.ensemble(
                [table["finetuned"](f, s, t), table["head-w1"](f, s, t)], self.labels[s]),
            "soup": lambda f, s, t: self.souped(f, s, t)["soup"],
            "seeds": lambda f, s, t: self.souped(f, s, t)["seeds"],
            "soup-first": lambda f, s, t: self.souped(f, s, t)["first"],
        }  # fmt: skip
        return table[name]

    # ---- measurements ------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        self.cv_predictions: dict[str, np.ndarray] = {}
        for name in self.args.recipes:
            self.ft_seconds: list[dict[str, Any]] = []
            recipe = self.recipe(name)
            entry: dict[str, Any] = {} if self.args.cv_only else self.on_valid(name, recipe)
            if self.args.k > 1 and name not in self.args.no_cv:
                self.echo(f"== {name}: {self.args.k}-fold CV over train + valid")
                self.cv_mode = True
                cv = cross_validate(
                    recipe=lambda f, s, t, r=recipe: r(f, s, t)[1],
                    labels=self.labels,
                    k=self.args.k,
                    seed=self.args.seed,
                    on_fold=lambda i, f1: self.echo(f"   fold {i}: macro-F1 {f1:.4f}"),
                )
                d = cv.to_dict()
                entry["cv"] = d
                self.cv_predictions[name] = cv.probabilities.argmax(axis=1)
                # so runs on other machines or days can be paired on the same questions
                entry["cv_predictions"] = self.cv_predictions[name].tolist()
                self.echo(f"   CV macro-F1 {d['macro_f1']:.4f} CI {d['ci95']['macro_f1']} ECE "
                          f"{d['ece']:.4f} " + " ".join(f"{k[:5]}={v:.3f}"
                                                        for k, v in d["f1"].items()))  # fmt: skip
            self.cv_mode = False
            if self.ft_seconds:
                entry["finetune_seconds"] = self.ft_seconds
            out[name] = entry
        return out

    def paired(self) -> list[dict[str, Any]]:
        """Each later recipe minus the first, on the same CV predictions (paired bootstrap)."""
        names = list(self.cv_predictions)
        rows = []
        for name in names[1:]:
            a, b = self.cv_predictions[name], self.cv_predictions[names[0]]
            d = paired_difference(self.labels, a, b, seed=self.args.seed)
            rows.append({"a": name, "b": names[0], **d})
            self.echo(f"== {name} - {names[0]}: macro-F1 {d['macro_f1']['diff']:+.4f} "
                      f"{d['macro_f1']['ci']} " + " ".join(
                          f"{k[:5]}={v['diff']:+.3f}" for k, v in d["f1"].items()))  # fmt: skip
        return rows

    def on_valid(self, name: str, recipe: Callable[..., Probs]) -> dict[str, Any]:
        """Fit on train.csv, select and calibrate on valid.csv, score valid (optimistic)."""
        self.echo(f"== {name}: valid (fit train.csv, select + calibrate on valid.csv)")
        t0, c0 = time.perf_counter(), time.process_time()
        _, p = recipe(self.train_idx, self.valid_idx, self.valid_idx)
        valid_s, valid_cpu = time.perf_counter() - t0, time.process_time() - c0
        y = self.labels[self.valid_idx]
        rep = classification_report(y, p.argmax(axis=1))
        self.echo(f"   valid macro-F1 {rep.macro_f1:.4f} acc {rep.accuracy:.4f} "
                  + " ".join(f"{k[:5]}={v:.3f}" for k, v in rep.f1_by_label().items()))  # fmt: skip
        return {
            "valid": {
                "macro_f1": rep.macro_f1,
                "accuracy": rep.accuracy,
                "f1": rep.f1_by_label(),
                "per_class": [asdict(c) for c in rep.per_class],
                "ece_calibrated_on_valid": expected_calibration_error(p, y),
            },
            "train_seconds_this_run": valid_s,
            "train_cpu_seconds_this_run": valid_cpu,
            "load_avg_1min_after": os.getloadavg()[0],
        }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--recipes", nargs="+", default=["head", "finetuned", "ensemble"])
    p.add_argument("--no-cv", nargs="*", default=[], help="recipes scored on valid only")
    p.add_argument("--cv-only", action="store_true", help="skip the fit-on-train valid score")
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--lr", type=float, default=FineTuneConfig.lr)
    p.add_argument("--epochs", type=int, default=FineTuneConfig.epochs)
    p.add_argument("--power", type=float, default=FineTuneConfig.class_weight_power)
    p.add_argument("--batch-size", type=int, default=FineTuneConfig.batch_size)
    p.add_argument("--train-layers", type=int, default=FineTuneConfig.train_layers)
    p.add_argument("--base", default="all-MiniLM-L6-v2",
                   help="encoder to fine-tune: registry name or local folder")  # fmt: skip
    p.add_argument("--device", default="cpu", help="where fine-tuning runs: cpu or cuda")
    p.add_argument("--soup", type=int, default=3, help="fine-tunes per soup / seed ensemble")
    p.add_argument("--work", type=Path, default=Path.home() / ".cache/typed-rag-exp/classifier-16")
    p.add_argument("--out", type=Path, help="write the JSON here")
    p.add_argument("--speed", nargs="+", metavar="LABEL=KIND:FOLDER",
                   help="time these trained classifiers instead")  # fmt: skip
    p.add_argument("--speed-n", type=int, default=200)
    args = p.parse_args()
    bench = Bench(args)
    t0 = time.perf_counter()
    if args.speed:
        results = speed(args.speed, args.speed_n, bench.echo)
    else:
        results = bench.run()
    payload = {
        "machine": {"cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                    "platform": platform.platform(), "load_avg_end": os.getloadavg()},
        "args": {k: str(v) for k, v in vars(args).items()},
        "labels": [t.value for t in LABELS],
        "wall_seconds": time.perf_counter() - t0,
        "recipes": results,
    }  # fmt: skip
    if not args.speed and len(bench.cv_predictions) > 1:
        payload["paired"] = bench.paired()
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(payload, indent=2) + "\n")
        bench.echo(f"wrote {args.out}")


if __name__ == "__main__":
    main()

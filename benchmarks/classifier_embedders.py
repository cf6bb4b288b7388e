"""Question-type classifier: frozen embedders, lexical variants and ensembles in 5-fold CV.

The same folds and fit/select splits as ``typed_rag/classifier/crossval.py`` (seed 42),
but every hyper-parameter (head grid, early stopping, L2, temperatures, biases) is
chosen on each fold's select part. Embeddings of the 9,587 train + valid questions
are read from ``$W/emb-NAME.npy`` (write them first: MiniLM / mpnet with
``embed_questions``, e5 with ``E5Encoder.encode_queries`` of the lower-cased questions,
one thread); per-fold probabilities
are cached in ``$W/exp`` and each recipe's scores appended to
``$W/exp-results.jsonl``. Results: results/classifier/bench-embedders-cv.json.
``--finetuned`` adds the fine-tuned encoder (``fine_tune``, 2 threads, ~7 minutes a fold
on an idle 2-core CPU) alone and in ensembles.

    W=~/.cache/typed-rag/bench/classifier-16b python benchmarks/classifier_embedders.py
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from typed_rag.classifier.crossval import bootstrap_ci, stratified_folds, stratified_split
from typed_rag.classifier.data import read_nfcats_csv, split_path
from typed_rag.classifier.finetune import FineTuneConfig, logits_of
from typed_rag.classifier.finetune_train import fine_tune
from typed_rag.classifier.head import HeadConfig, fit_temperature, softmax, train_head
from typed_rag.classifier.head import logits_of as head_logits
from typed_rag.classifier.lexical import (
    FEATURE_SETS,
    Vocabulary,
    features,
    linear_logits,
    train_linear,
    words_of,
)
from typed_rag.classifier.metrics import classification_report
from typed_rag.config import load_settings
from typed_rag.models import ensure_model
from typed_rag.types import LABELS

torch.set_num_threads(1)  # a shared 2-core machine: one thread, run under nice


def f_char(q):
    """The base features plus character 3-5-grams of the lower-cased words."""
    out = features(q)
    t = " " + " ".join(words_of(q)) + " "
    for n in (3, 4, 5):
        out.update("#" + t[i : i + n] for i in range(len(t) - n + 1))
    return out


FEATURE_SETS["char"] = f_char  # bench only: too slow to train for the artefact


W = Path(os.environ["W"])
S = load_settings()
d = S.classifier.data_dir
tr, va = read_nfcats_csv(split_path(d, "train")), read_nfcats_csv(split_path(d, "valid"))
Q = tr.questions + va.questions
Y = np.asarray(tr.labels + va.labels)
K, SEED = 5, 42
TRAIN_IDX, VALID_IDX = np.arange(len(tr)), np.arange(len(tr), len(Y))


def splits() -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    out = []
    for i, test in enumerate(stratified_folds(Y, K, SEED)):
        rest = np.setdiff1d(np.arange(len(Y)), test)
        fit, sel = stratified_split(rest, Y, 0.2, SEED + 1 + i)
        out.append((fit, sel, test))
    return out


SPLITS = splits()
_EMB: dict[str, np.ndarray] = {}


def emb(name: str) -> np.ndarray:
    if name not in _EMB:
        if "+" in name:
            _EMB[name] = np.hstack([emb(n) for n in name.split("+")])
        else:
            _EMB[name] = np.load(W / f"emb-{name}.npy")
    return _EMB[name]


def cached(tag: str, fold: int, run):
    path = W / "exp" / f"{tag}-f{fold}.npz"
    path.parent.mkdir(exist_ok=True)
    if path.is_file():
        z = np.load(path)
        return z["select"], z["test"]
    t0 = time.perf_counter()
    s, t = run()
    np.savez(path, select=s, test=t)
    print(f"  {tag} fold {fold}: {time.perf_counter() - t0:.0f} s", flush=True)
    return s, t


GRID = ((256, 0.0), (256, 0.5), (512, 0.0), (512, 0.5))


def head(name: str, grid=GRID, patience: int | None = 10, **cfg):
    """MLP head on embedding ``name``, grid chosen on each fold's select part."""
    tag = f"head-{name}-{_h(grid, patience, cfg)}"

    def fold(i, fit, sel, test):
        def run():
            x = emb(name)
            runs = [
                train_head(x[fit], Y[fit], x[sel], Y[sel],
                           replace(HeadConfig(), hidden=h, class_weight_power=p,
                                   patience=patience, **cfg), seed=SEED)
                for h, p in grid
            ]  # fmt: skip
            best = max(runs, key=lambda r: r.valid_macro_f1)
            z = head_logits(best.model, x[sel])
            t = fit_temperature(z, Y[sel])
            print(
                f"    {tag} chose {best.config.hidden},{best.config.class_weight_power} "
                f"ep {best.best_epoch} sel {best.valid_macro_f1:.3f}",
                flush=True,
            )
            return softmax(z, t), softmax(head_logits(best.model, x[test]), t)

        return cached(tag, i, run)

    return fold


def _h(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:8]


def lexlin(power: float = 1.0, feature_set: str = "base", max_terms: int = 4000,
           l2_grid=(1e-5, 1e-4, 1e-3)):  # fmt: skip
    tag = f"lexlin-{power}-{feature_set}-{max_terms}-{_h(l2_grid)}"

    def fold(i, fit, sel, test):
        def run():
            v = Vocabulary.fit([Q[j] for j in fit], max_terms=max_terms, feature_set=feature_set)
            x = v.transform(Q)
            m, l2 = train_linear(x[fit], Y[fit], x[sel], Y[sel], l2_grid=l2_grid, power=power)
            z = linear_logits(m, x[sel])
            t = fit_temperature(z, Y[sel])
            print(f"    {tag} l2={l2}", flush=True)
            return softmax(z, t), softmax(linear_logits(m, x[test]), t)

        return cached(tag, i, run)

    return fold


def finetuned(**overrides):
    """all-MiniLM-L6-v2 fine-tuned on fit, best epoch and temperature on select (the recipe of
    ``classifier train --kind finetuned`` without its lexical part)."""
    cfg = replace(FineTuneConfig(), **overrides)
    tag = f"finetuned-{_h(cfg)}"

    def fold(i, fit, sel, test):
        def run():
            folder = ensure_model(S, "all-MiniLM-L6-v2")
            q_fit, q_sel = [Q[j] for j in fit], [Q[j] for j in sel]
            res, tok, _ = fine_tune(folder, q_fit, Y[fit], q_sel, Y[sel], cfg, seed=SEED)
            t = fit_temperature(res.valid_logits, Y[sel])
            z = logits_of(res.model, tok, [Q[j] for j in test], cfg.max_length, batch_size=128)
            print(f"    {tag} best epoch {res.best_epoch}, {res.seconds:.0f} s", flush=True)
            return softmax(res.valid_logits, t), softmax(z, t)

        return cached(tag, i, run)

    return fold


def ens(*parts, weights=None):
    def fold(i, fit, sel, test):
        ps = [p(i, fit, sel, test) for p in parts]
        w = np.ones(len(ps)) / len(ps) if weights is None else np.asarray(weights)
        ls = sum(wi * np.log(np.maximum(p[0], 1e-12)) for wi, p in zip(w, ps, strict=False))
        lt = sum(wi * np.log(np.maximum(p[1], 1e-12)) for wi, p in zip(w, ps, strict=False))
        t = fit_temperature(ls, Y[sel])
        return softmax(ls, t), softmax(lt, t)

    return fold


BIAS_GRID = np.arange(-1.0, 3.01, 0.25)


def biased(part, grid=BIAS_GRID, rounds: int = 2, only=None):
    """Per-class additive log-bias chosen on select by coordinate ascent on macro-F1."""

    def fold(i, fit, sel, test):
        ps, pt = part(i, fit, sel, test)
        ls, lt = np.log(np.maximum(ps, 1e-12)), np.log(np.maximum(pt, 1e-12))
        b = np.zeros(len(LABELS))
        best = classification_report(Y[sel], ls.argmax(1)).macro_f1
        classes = only if only is not None else range(len(LABELS))
        for _ in range(rounds):
            for c in classes:
                for v in grid:
                    bb = b.copy()
                    bb[c] = v
                    f = classification_report(Y[sel], (ls + bb).argmax(1)).macro_f1
                    if f > best + 1e-9:
                        best, b = f, bb
        t = fit_temperature(ls + b, Y[sel])
        return softmax(ls + b, t), softmax(lt + b, t)

    return fold


def cv(name: str, recipe, boot: int = 1000) -> dict:
    probs = np.zeros((len(Y), len(LABELS)))
    folds = []
    for i, (fit, sel, test) in enumerate(SPLITS):
        probs[test] = recipe(i, fit, sel, test)[1]
        folds.append(classification_report(Y[test], probs[test].argmax(1)).macro_f1)
    pred = probs.argmax(1)
    rep = classification_report(Y, pred)
    ci = bootstrap_ci(Y, pred, n=boot, seed=SEED)
    f1 = rep.f1_by_label()
    row = {"recipe": name, "macro_f1": rep.macro_f1, "ci": ci["macro_f1"], "acc": rep.accuracy,
           "f1": f1, "folds": folds}  # fmt: skip
    print(f"{name:55s} macroF1 {rep.macro_f1:.4f} [{ci['macro_f1'][0]:.3f},{ci['macro_f1'][1]:.3f}]"
          f" acc {rep.accuracy:.4f} EXP {f1['EXPERIENCE']:.3f} COMP {f1['COMPARISON']:.3f} "
          + " ".join(f"{k[:4]}={v:.3f}" for k, v in f1.items() if k not in ('EXPERIENCE', 'COMPARISON')),
          flush=True)  # fmt: skip
    with (W / "exp-results.jsonl").open("a") as f:
        f.write(json.dumps(row) + "\n")
    return row


def main() -> None:
    """The recipes measured for issue 16, in the order they were run."""
    hm, hp, l1 = head("all-MiniLM-L6-v2"), head("all-mpnet-base-v2"), lexlin(1.0)
    hc, he = head("all-MiniLM-L6-v2+all-mpnet-base-v2"), head("e5-small-q4")
    lp = lexlin(1.0, feature_set="plus", max_terms=8000)
    cv("lexlin-w1", l1)
    cv("head-minilm (grid per fold)", hm)
    cv("ens head-minilm + lexlin-w1", ens(hm, l1))
    cv("biased(ens head-minilm + lexlin-w1)", biased(ens(hm, l1)))
    cv("lexlin-w1 f_plus 4000", lexlin(1.0, feature_set="plus"))
    cv("ens head-minilm + lexlin-w1 f_plus 4000", ens(hm, lexlin(1.0, feature_set="plus")))
    cv("lexlin-w1 f_plus 8000", lp)
    cv("ens head-minilm + lexlin-w1 f_plus 8000", ens(hm, lp))
    cv("head-mpnet", hp)
    cv("ens head-mpnet + lexlin-w1", ens(hp, l1))
    cv("ens head-minilm + head-mpnet + lexlin-w1", ens(hm, hp, l1))
    cv("head-concat", hc)
    cv("ens head-concat + lexlin-w1", ens(hc, l1))
    cv("ens head-mpnet + lexlin-w1 f_plus 8000", ens(hp, lp))
    cv("ens head-concat + lexlin-w1 f_plus 8000", ens(hc, lp))
    cv("ens head-minilm + head-mpnet + lexlin-w1 f_plus 8000", ens(hm, hp, lp))
    cv("head-e5-small-q4", he)
    cv("ens head-concat + head-e5 + lexlin-w1", ens(hc, he, l1))
    cv("ens head-e5 + lexlin-w1", ens(he, l1))
    cv("ens head-minilm + head-e5 + lexlin-w1", ens(hm, he, l1))
    cv("ens head-e5 + lexlin-w1 f_plus 8000", ens(he, lp))
    cv("ens head-minilm + head-e5 + lexlin-w1 f_plus 8000", ens(hm, he, lp))
    if "--char" in sys.argv[1:]:  # slow: ~150 s a fold
        cv(
            "ens head-minilm + lexlin-w1 f_char 8000",
            ens(hm, lexlin(1.0, feature_set="char", max_terms=8000)),
        )
    if "--finetuned" in sys.argv[1:]:
        ft = finetuned()
        cv("finetuned", ft)
        cv("ens finetuned + lexlin-w1", ens(ft, l1))
        cv("ens finetuned + lexlin-w1 f_plus 8000", ens(ft, lp))
        cv("ens finetuned + head-minilm + lexlin-w1 f_plus 8000", ens(ft, hm, lp))
        cv("ens finetuned + head-e5 + lexlin-w1 f_plus 8000", ens(ft, he, lp))
        cv("ens finetuned + head-minilm + head-e5 + lexlin-w1 f_plus 8000", ens(ft, hm, he, lp))


if __name__ == "__main__":
    main()
